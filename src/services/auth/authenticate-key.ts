import { ApiError } from '../../domain/errors.ts';
import { isUuid } from '../../domain/ids.ts';
import { hashApiKey } from '../../security/crypto.ts';
import { fork, type Deps } from '../../runs/deps.ts';
import type { Principal } from '../../domain/principal.ts';
import { ShortLivedCache } from '../../db/short-lived-cache.ts';
import { dateOrNull } from '../../db/sql.ts';
import type { FlowAllowance } from '../../domain/run-flow-control.ts';

export const SCOPES = ['run:execute', 'run:read'] as const;
export type Scope = (typeof SCOPES)[number];

const BEARER = /^Bearer\s+(\S+)\s*$/i;

interface KeyRow {
  id: string;
  accountId: string;
  handle: string;
  restricted: boolean;
  revoked: boolean;
  expiresAt: Date | null;
  scopes: string[];
  rateLimitPerMinute: number;
  runBudgetPerMinute: number;
  spendCap: Principal['spendCap'];
  flow: FlowAllowance;
}

/**
 * Every request looks its key up, and keys change only when a catalog is loaded, so each service
 * instance keeps a found key for a second (src/db/short-lived-cache.ts: one read at a time per key, the next one
 * begun ahead): a revocation or an account restriction reaches a running process within that second
 * (expiry itself is checked on every request). Unknown keys are never kept, so guessing cannot fill the
 * cache.
 */
const KEY_CACHE_MS = 1000;
const KEY_CACHE_MAX = 10_000;
const keyCaches = new WeakMap<object, ShortLivedCache<KeyRow>>();

function findKey(deps: Pick<Deps, 'orm'>, hash: string): Promise<KeyRow | null> {
  let cache = keyCaches.get(deps);
  if (!cache) keyCaches.set(deps, (cache = new ShortLivedCache(KEY_CACHE_MS, KEY_CACHE_MAX)));
  return cache.get(hash, () => readKey(deps, 'key_hash', hash));
}

/** The key whose `column` (its hash, or its id) is `value`. */
async function readKey(deps: Pick<Deps, 'orm'>, column: 'key_hash' | 'id', value: string): Promise<KeyRow | null> {
  const [r] = await fork(deps).execute<Record<string, unknown>[]>(
    `select k.id, k.account_id, k.scopes, k.rate_limit_per_minute, k.run_budget_per_minute, k.spend_cap_window, k.spend_cap_usd,
            k.high_priority, k.max_concurrent_per_concurrency_key,
            k.expires_at, k.revoked, a.handle, a.restricted
       from api_keys k join accounts a on a.id = k.account_id
      where k.${column} = ?`,
    [value],
  );
  if (!r) return null;
  return {
    id: String(r.id),
    accountId: String(r.account_id),
    handle: String(r.handle),
    restricted: Boolean(r.restricted),
    revoked: Boolean(r.revoked),
    expiresAt: dateOrNull(r.expires_at),
    scopes: (typeof r.scopes === 'string' ? JSON.parse(r.scopes) : r.scopes) as string[],
    rateLimitPerMinute: Number(r.rate_limit_per_minute),
    runBudgetPerMinute: Number(r.run_budget_per_minute),
    spendCap: r.spend_cap_window ? { window: r.spend_cap_window as 'daily' | 'monthly' | 'lifetime', usd: String(r.spend_cap_usd) } : null,
    flow: {
      highPriority: Boolean(r.high_priority),
      maxConcurrentPerConcurrencyKey: r.max_concurrent_per_concurrency_key === null ? null : Number(r.max_concurrent_per_concurrency_key),
    },
  };
}

/**
 * Looks the key up by its hash: 401 for anything but a live key, 403 for a restricted account.
 * `deps` is the service instance: its found keys are kept for a second (see findKey).
 */
export async function authenticateKey(deps: Pick<Deps, 'orm'>, authorization: string | undefined): Promise<Principal> {
  const match = authorization ? BEARER.exec(authorization) : null;
  if (!match) throw new ApiError('unauthorized', 'missing or malformed Authorization header; expected "Bearer <API_KEY>"');
  return principalOf(await findKey(deps, hashApiKey(match[1])));
}

/**
 * The principal of the key with id `apiKeyId` (internal GraphQL acting for a key: POST /runs/replay's
 * service), refused as that key's requests would be.
 */
export async function principalOfKey(deps: Pick<Deps, 'orm'>, apiKeyId: string): Promise<Principal> {
  return principalOf(isUuid(apiKeyId) ? await readKey(deps, 'id', apiKeyId.toLowerCase()) : null);
}

function principalOf(row: KeyRow | null): Principal {
  if (!row || row.revoked || (row.expiresAt && row.expiresAt.getTime() <= Date.now())) {
    throw new ApiError('unauthorized', 'the API key is invalid, revoked or expired');
  }
  if (row.restricted) throw new ApiError('account_restricted', 'this account is restricted; contact support');
  return {
    apiKeyId: row.id,
    accountId: row.accountId,
    accountHandle: row.handle,
    scopes: row.scopes,
    rateLimitPerMinute: row.rateLimitPerMinute,
    runBudgetPerMinute: row.runBudgetPerMinute,
    spendCap: row.spendCap,
    flow: row.flow,
  };
}

/** Any-of scope matching (spec, Authentication rule 3). */
export function requireScope(principal: Principal, anyOf: readonly string[]): void {
  if (!anyOf.some((s) => principal.scopes.includes(s))) {
    throw new ApiError('insufficient_scope', `this operation needs one of the scopes: ${anyOf.join(', ')}`);
  }
}
