import type { GroupTail } from '../../db/group-commit.ts';
import { loggedRows, outsideTransaction } from '../../db/statement.ts';
import type { RunsDeps } from '../../runs/deps.ts';
import { stateFromRow } from '../../runs/run-state.ts';
import { ADMIT_QUEUED_IF_LOCKED, admitted, admitValues, TRY_LOCK_ADMISSION, type AdmitFromQueueArgs } from '../../sql/admit-queued.ts';
import type { AdmitResult } from '../../runs/admit-runs.ts';
import type { AdmissionPump } from './admission-pump.ts';

/**
 * The embedded engine's admission round carried by the acceptances' group commit
 * (src/db/group-commit.ts GroupTail): after a group of POST /runs acceptances, in their transaction and
 * their one message, TRY_LOCK_ADMISSION and ADMIT_QUEUED_IF_LOCKED admit from the queue as a round of
 * the engine's own would, the group's new runs included. A run accepted alone and admitted at once then
 * costs one round trip to Postgres and one commit less, and its acceptance needs no round of its own.
 *
 * The acceptances hold rows (a key's rate window, idempotency records, a cap) while the round runs, so
 * it never waits: not for the admission lock (taken only if free; when it is not, the round admits
 * nothing and the acceptances ask the pump for a round as before) and not for a queued run's row
 * (skipped, and counted as still waiting). See docs/architecture.md#admission-carried-by-acceptances.
 */
export function admissionInAcceptance(o: {
  deps: RunsDeps;
  args: AdmitFromQueueArgs;
  pump: AdmissionPump;
  running: () => boolean;
  admitted: (r: AdmitResult) => void;
  failed: (err: unknown) => void;
}): GroupTail {
  return {
    next() {
      if (!o.running()) return null;
      const mark = o.pump.roundElsewhere();
      const values = admitValues(o.args);
      return {
        statements: [
          [TRY_LOCK_ADMISSION, []],
          [ADMIT_QUEUED_IF_LOCKED, values],
        ],
        done(results) {
          if (!results) return false;
          const [lockResult, admitResult] = results as { rows: Record<string, unknown>[] }[];
          const first = admitResult?.rows[0];
          const covered = first?.locked === true;
          if (covered) o.pump.roundElsewhereDone(Number(first.looked_at) > Number(first.picked_count), mark);
          const start = async () => {
            // Through the ORM's query log like every statement (counts, slow-query logs).
            const em = outsideTransaction(o.deps.orm);
            await loggedRows(em, TRY_LOCK_ADMISSION, [], lockResult);
            const rows = await loggedRows(em, ADMIT_QUEUED_IF_LOCKED, values, admitResult);
            if (!covered) return;
            const r = admitted(rows);
            if (r.rows.length === 0) return;
            const states = await Promise.all(r.rows.map((row) => stateFromRow(em, String(row.id), row)));
            o.admitted({ admitted: states.map((st) => st.runId), states, more: r.more });
          };
          // After the group's callers have answered: a POST /runs response is written before its
          // run's first step is computed.
          setImmediate(() => start().catch(o.failed));
          return covered;
        },
      };
    },
  };
}
