import { ApiError } from '../../domain/errors.ts';
import { hashApiKey } from '../../security/crypto.ts';
import { fork, type Deps } from '../deps.ts';
import { dateOrNull } from '../../db/sql.ts';

export const SCOPES = ['run:execute', 'run:read'] as const;
export type Scope = (typeof SCOPES)[number];

/** The caller behind a bearer key. */
export interface Principal {
  apiKeyId: string;
  accountId: string;
  accountHandle: string;
  scopes: string[];
  rateLimitPerMinute: number;
  spendCap: { window: 'daily' | 'monthly' | 'lifetime'; usd: string } | null;
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/** Looks the key up by its hash: 401 for anything but a live key, 403 for a restricted account. */
export async function authenticateKey(deps: Pick<Deps, 'orm'>, authorization: string | undefined): Promise<Principal> {
  const match = authorization ? BEARER.exec(authorization) : null;
  if (!match) throw new ApiError('unauthorized', 'missing or malformed Authorization header; expected "Bearer <API_KEY>"');
  const rows = await fork(deps).execute<Record<string, unknown>[]>(
    `select k.id, k.account_id, k.scopes, k.rate_limit_per_minute, k.spend_cap_window, k.spend_cap_usd,
            k.expires_at, k.revoked, a.handle, a.restricted
       from api_keys k join accounts a on a.id = k.account_id
      where k.key_hash = ?`,
    [hashApiKey(match[1]!)],
  );
  const row = rows[0];
  const expiresAt = row ? dateOrNull(row.expires_at) : null;
  if (!row || row.revoked || (expiresAt && expiresAt.getTime() <= Date.now())) {
    throw new ApiError('unauthorized', 'the API key is invalid, revoked or expired');
  }
  if (row.restricted) throw new ApiError('account_restricted', 'this account is restricted; contact support');
  return {
    apiKeyId: String(row.id),
    accountId: String(row.account_id),
    accountHandle: String(row.handle),
    scopes: (typeof row.scopes === 'string' ? JSON.parse(row.scopes) : row.scopes) as string[],
    rateLimitPerMinute: Number(row.rate_limit_per_minute),
    spendCap: row.spend_cap_window
      ? { window: row.spend_cap_window as 'daily' | 'monthly' | 'lifetime', usd: String(row.spend_cap_usd) }
      : null,
  };
}

/** Any-of scope matching (spec, Authentication rule 3). */
export function requireScope(principal: Principal, anyOf: readonly string[]): void {
  if (!anyOf.some((s) => principal.scopes.includes(s))) {
    throw new ApiError('insufficient_scope', `this operation needs one of the scopes: ${anyOf.join(', ')}`);
  }
}
