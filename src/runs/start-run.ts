import { cancelAfterSeconds } from '../domain/run-deadline.ts';
import { startAfterSeconds } from '../domain/run-start.ts';
import type { Principal } from '../domain/principal.ts';
import type { Deps } from './deps.ts';
import type { AcceptedRun } from './run-views.ts';
import { startRuns } from './start-runs.ts';

/**
 * POST /runs: a set of one through the one start path (start-runs.ts), its item's refusal thrown as the
 * request's. Funding happens later, during preparation (docs/architecture.md).
 */

export interface StartRunRequest {
  /** The parsed JSON body (anything: it is checked here). */
  body: unknown;
  /** The Idempotency-Key header, if any. */
  idempotencyHeader?: string;
  /** The Cancel-After header, if any (src/domain/run-deadline.ts). */
  cancelAfterHeader?: string;
  /** The Start-After header, if any (src/domain/run-start.ts). */
  startAfterHeader?: string;
  /** A replay's: the run it replays (replay-run.ts). */
  replayOf?: string;
}

export interface StartRunResult {
  run: AcceptedRun;
  replayed: boolean;
  /** The call joined a waiting run of its debounce key (docs/design/flow-control.md#debounce). */
  debounced: boolean;
}

export async function startRun(deps: Deps, principal: Principal, req: StartRunRequest): Promise<StartRunResult> {
  const [outcome] = await startRuns(deps, principal, [req.body], {
    cancelAfterSeconds: cancelAfterSeconds(req.cancelAfterHeader),
    startAfterSeconds: startAfterSeconds(req.startAfterHeader),
    itemKeyHeader: req.idempotencyHeader,
    ...(req.replayOf === undefined ? {} : { replayOf: [req.replayOf] }),
  });
  if ('error' in outcome) throw outcome.error;
  return { run: outcome.run, replayed: outcome.replayed, debounced: outcome.debounced === true };
}
