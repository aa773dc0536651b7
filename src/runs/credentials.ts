import type { Provider } from '../domain/graph/types.ts';
import { fork, type RunsDeps } from './deps.ts';
import type { Em } from '../db/orm.ts';
import { graphOf, readRun } from './run-state.ts';
import { query } from '../db/statement.ts';
import { SUPPLIED_CREDENTIAL, SUPPLIED_CREDENTIALS } from '../sql/run-secrets.ts';
import { ACCOUNT_PROVIDER_KEY } from '../sql/provider-keys.ts';

/** Credentials supplied to a run (run_secrets of kind provider_credential). */

export async function hasSuppliedCredential(em: Em, runId: string, provider: string): Promise<boolean> {
  const rows = await query(em, SUPPLIED_CREDENTIAL, [runId, provider]);
  return rows.length > 0;
}

/** A BYOK run has no key for `provider`: none supplied to the run, none stored by its account. */
export async function lacksProviderKey(em: Em, runId: string, accountId: string, provider: string): Promise<boolean> {
  if (await hasSuppliedCredential(em, runId, provider)) return false;
  return (await query(em, ACCOUNT_PROVIDER_KEY, [accountId, provider])).length === 0;
}

/**
 * For a run suspended with wait_signal: are there supplied credentials for a provider that one of its
 * unfinished llm.chat nodes needs? (Then the run can resume, e.g. after the signal was missed.)
 */
export async function credentialsAvailable(deps: RunsDeps, runId: string): Promise<boolean> {
  const em = fork(deps);
  const run = await readRun(em, runId);
  if (!run) return false;
  const graph = await graphOf(em, run.versionId);
  const wanted = new Set(graph.nodes.filter((n) => n.kind === 'llm.chat' && !run.progress.results[n.id]).map((n) => (n.kind === 'llm.chat' ? n.provider : '')));
  if (wanted.size === 0) return false;
  const rows = await query<{ name: string }>(em, SUPPLIED_CREDENTIALS, [runId]);
  return rows.some((r) => wanted.has(r.name as Provider));
}
