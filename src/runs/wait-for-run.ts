import { ApiError } from '../domain/errors.ts';
import { fork, type Deps } from './deps.ts';
import { getRun } from './get-run.ts';
import { query } from '../db/statement.ts';
import { RUN_STATUS } from '../sql/runs.ts';
import { isTerminal } from '../domain/run-status.ts';

/**
 * `Prefer: wait=N` on POST /runs (docs/design/prefer-wait.md): holds the answer until the run is terminal
 * or the time is up. It listens on the run event bus (in process, or Postgres LISTEN/NOTIFY across
 * processes), so a run driven by another process or engine is seen the moment its terminal event commits.
 * Terminal status and terminal event are written in one transaction and announced after the commit, so a
 * status read after a notification sees it. The read right after subscribing closes the race with a run
 * that finished between acceptance and the subscription.
 */

export const MAX_WAIT_SECONDS = 60;

/**
 * Resolves true once the run is terminal, false when `ms` pass, `signal` aborts (the client went away)
 * or the status cannot be read (the run was accepted all the same: the caller answers 202). Never rejects;
 * its bus listener and timer are gone when it resolves.
 */
export function waitForTerminalRun(deps: Pick<Deps, 'bus' | 'orm' | 'log'>, runId: string, ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    if (ms <= 0 || signal?.aborted) return resolve(false);
    let done = false;
    let reading = false;
    let again = false;
    const finish = (terminal: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      unsubscribe();
      signal?.removeEventListener('abort', onAbort);
      resolve(terminal);
    };
    const onAbort = () => finish(false);
    // One status read in flight; notifications that arrive meanwhile ask for one more read after it.
    const check = async (): Promise<void> => {
      if (done) return;
      if (reading) {
        again = true;
        return;
      }
      reading = true;
      try {
        do {
          again = false;
          const [row] = await query<{ status: string }>(fork(deps), RUN_STATUS, [runId]);
          if (!row || isTerminal(row.status)) return finish(Boolean(row));
        } while (again && !done);
      } catch (err) {
        deps.log.warn({ err, runId }, 'Prefer: wait could not read the run; answering 202');
        finish(false);
      } finally {
        reading = false;
      }
    };
    const unsubscribe = deps.bus.subscribe(runId, () => void check());
    const timer = setTimeout(finish, ms, false);
    signal?.addEventListener('abort', onAbort, { once: true });
    void check();
  });
}

/**
 * The run as `GET /runs/{id}` shows it if it ends within `ms`, else null. A run whose outputs cannot be
 * returned inline is null too: the 202 points the caller at `GET /runs/{id}`, which explains.
 */
export async function waitForRunResult(deps: Deps, accountId: string, runId: string, ms: number, signal?: AbortSignal) {
  if (!(await waitForTerminalRun(deps, runId, ms, signal))) return null;
  try {
    return await getRun(deps, accountId, runId);
  } catch (err) {
    // The run was accepted whatever happens here: the 202 still tells the caller where it is.
    if (!(err instanceof ApiError)) deps.log.warn({ err, runId }, 'Prefer: wait could not read the finished run; answering 202');
    return null;
  }
}
