import { outsideTransaction, query } from '../db/statement.ts';
import type { ApiError } from '../domain/errors.ts';
import type { RunDebounce } from '../domain/run-debounce.ts';
import { LOCK_BATCH_KEY } from '../sql/batch-keys.ts';
import { JOIN_DEBOUNCED_RUN } from '../sql/debounce-runs.ts';
import type { Deps } from './deps.ts';
import { acceptanceOf, acceptRuns, type AcceptCall, type Acceptance } from './accept-run.ts';

/**
 * Debounce, trailing (docs/design/flow-control.md#debounce). A call with `debounce` either joins the run
 * of its key still waiting for its start (same account and workflow version): that run takes the call's
 * inputs and metadata and starts `delay` after this call, never later than `maxDelay` after the burst's
 * first call; or, when none waits, it is accepted as a new run scheduled `delay` from now, which later
 * calls can join. Both happen under the key's advisory lock, in one transaction, so two first calls never
 * make two runs. A joining call writes no run, reserves no spend cap and is never charged: the one run
 * that starts is.
 */

export type DebouncedAnswer = { answer: Acceptance | ApiError; joined: boolean };

/** Joins the waiting run of `debounce.key`, or accepts `call` as the burst's run. */
export async function startDebounced(deps: Deps, call: AcceptCall, debounce: RunDebounce): Promise<DebouncedAnswer> {
  const { principal } = call.run;
  return outsideTransaction(deps.orm).transactional(async (tx) => {
    // The batch keys' lock space, with a prefix no batch key's MAC can take.
    await query(tx, LOCK_BATCH_KEY, [principal.accountId, `debounce:${debounce.key}`]);
    const acceptance = acceptanceOf(deps, call.run, null, '', null, null);
    const joining = {
      ord: 1,
      account_id: principal.accountId,
      version_id: call.run.versionId,
      key: debounce.key,
      delay_s: debounce.delaySeconds,
      inputs: acceptance.inputsJson,
      metadata: acceptance.metadataJson,
    };
    const secrets = acceptance.secrets.map((s) => ({ ord: 1, ...s }));
    const [joined] = await query<{ id: string }>(tx, JOIN_DEBOUNCED_RUN, [JSON.stringify([joining]), JSON.stringify(secrets)]);
    if (joined) return { answer: { runId: String(joined.id), replayed: false }, joined: true };
    const now = Date.now();
    const run = { ...call.run, startAt: now + debounce.delaySeconds * 1000, debounce: { key: debounce.key, untilMs: now + debounce.maxDelaySeconds * 1000 } };
    const [answer] = await acceptRuns(tx, deps, [{ ...call, run }]);
    return { answer: answer, joined: false };
  });
}
