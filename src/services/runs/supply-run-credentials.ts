import { randomUUID } from 'node:crypto';
import { invalidRequest, notFound } from '../../domain/errors.ts';
import { PROVIDERS, type Provider } from '../../domain/graph/types.ts';
import { fork, type Deps } from '../deps.ts';
import { isUuid } from '../../domain/ids.ts';
import { queueOf } from './queue-positions.ts';
import { findRun, toPublicRun, type PublicRun } from './run-views.ts';
import { isTerminal } from '../../domain/run-status.ts';

export interface SuppliedCredential {
  provider: string;
  apiKey: string;
}

/**
 * The credentials signal (GraphQL `supplyRunCredentials`): seals the keys as the run's
 * `provider_credential` secrets (replacing earlier ones for the same provider), then tells the engine,
 * which resumes a run suspended with wait_signal. The secrets are deleted when the run ends, like every
 * run secret. A terminal run is returned unchanged and nothing is stored for it.
 */
export async function supplyRunCredentials(deps: Deps, runId: string, credentials: SuppliedCredential[]): Promise<PublicRun> {
  if (!isUuid(runId)) throw notFound('run');
  if (!Array.isArray(credentials) || credentials.length === 0) throw invalidRequest('at least one credential is required');
  const byProvider = new Map<Provider, string>();
  for (const c of credentials) {
    if (!c || typeof c.provider !== 'string' || !(PROVIDERS as readonly string[]).includes(c.provider)) {
      throw invalidRequest(`unknown provider ${JSON.stringify(c?.provider)}; expected one of ${PROVIDERS.join(', ')}`);
    }
    if (typeof c.apiKey !== 'string' || c.apiKey.trim() === '') throw invalidRequest(`the ${c.provider} apiKey must not be empty`);
    byProvider.set(c.provider as Provider, c.apiKey.trim());
  }

  const em = fork(deps);
  const stored = await em.transactional(async (tx) => {
    // The run row lock orders this with finishRun, which deletes a run's secrets when it ends.
    const [run] = await tx.execute<{ status: string; account_id: string }[]>('select status, account_id from runs where id = ? for update', [runId]);
    if (!run) throw notFound('run');
    if (isTerminal(run.status)) return null;
    const params: unknown[] = [];
    const tuples: string[] = [];
    for (const [provider, key] of byProvider) {
      params.push(randomUUID(), runId, provider, deps.sealer.seal(key));
      tuples.push(`(?, ?, 'provider_credential', ?, ?, now())`);
    }
    await tx.execute(
      `insert into run_secrets (id, run_id, kind, name, ciphertext, created_at) values ${tuples.join(', ')}
       on conflict (run_id, kind, name) do update set ciphertext = excluded.ciphertext, created_at = excluded.created_at`,
      params,
    );
    return { accountId: String(run.account_id) };
  });

  if (stored) {
    await deps.engine
      .credentialsSupplied(runId)
      .catch((err) => deps.log.error({ err, runId, accountId: stored.accountId }, 'engine could not resume a run after credentials'));
  }
  const run = (await findRun(fork(deps), runId))!;
  return toPublicRun(run, await queueOf(deps, run));
}
