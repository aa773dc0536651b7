import { randomUUID } from 'node:crypto';
import { invalidRequest, notFound } from '../domain/errors.ts';
import { PROVIDERS, type Provider } from '../domain/graph/types.ts';
import { fork, type Deps } from './deps.ts';
import { isUuid } from '../domain/ids.ts';
import { queueOf } from './queue-positions.ts';
import { findRun, toPublicRun, type PublicRun } from './run-views.ts';
import { isTerminal } from '../domain/run-status.ts';
import { query } from '../db/statement.ts';
import { LOCK_RUN_TO_SUPPLY } from '../sql/runs.ts';
import { STORE_CREDENTIALS } from '../sql/run-secrets.ts';

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
    const [run] = await query<{ status: string; account_id: string }>(tx, LOCK_RUN_TO_SUPPLY, [runId]);
    if (!run) throw notFound('run');
    if (isTerminal(run.status)) return null;
    const providers = [...byProvider.keys()];
    await query(tx, STORE_CREDENTIALS, [runId, providers.map(() => randomUUID()), providers, providers.map((p) => deps.sealer.seal(byProvider.get(p)!))]);
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
