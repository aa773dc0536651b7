import type { GroupTail } from '../../db/group-commit.ts';
import { loggedRows, outsideTransaction } from '../../db/statement.ts';
import type { RunsDeps } from '../../runs/deps.ts';
import { stateFromRow } from '../../runs/run-state.ts';
import { ADMIT_QUEUED_IF_LOCKED, admitted, admitValues, TRY_LOCK_ADMISSION_FOR_ACCEPTANCES, type AdmitFromQueueArgs } from '../../sql/admit-queued.ts';
import type { AdmitResult } from '../../runs/admit-runs.ts';
import type { AdmissionPump } from './admission-pump.ts';

type Rows = { rows: Record<string, unknown>[] };

/**
 * The embedded engine's admission carried by the acceptances' group commit (src/db/group-commit.ts
 * GroupTail), in their transaction and their one message:
 *
 * - before them, TRY_LOCK_ADMISSION_FOR_ACCEPTANCES takes the admission lock if it is free and says how
 *   to admit, so an acceptance that finds the queue empty and room in flight inserts its run admitted
 *   (src/sql/accept-run.ts `adm`): one row version, and no round at all for it;
 * - after them, ADMIT_QUEUED_IF_LOCKED admits from the queue as a round of the engine's own would, the
 *   group's queued runs included; left out while the pump knows the queue to be clean, when it would
 *   admit nothing (a run the group queues anyway then asks the pump for a round).
 *
 * A run accepted alone and admitted at once then costs one round trip to Postgres, one commit and one
 * update of its row less. The acceptances hold rows (a key's rate window, idempotency records, a cap)
 * while the round runs, so nothing here waits: not for the admission lock (taken only if free; when it
 * is not, the acceptances queue their runs and ask the pump for a round as before) and not for a queued
 * run's row (skipped, and counted as still waiting). See docs/round-trips.md#admission-carried-by-acceptances.
 */
export function admissionInAcceptance(o: {
  deps: RunsDeps;
  args: AdmitFromQueueArgs;
  pump: AdmissionPump;
  running: () => boolean;
  admitted: (r: AdmitResult) => void;
  failed: (err: unknown) => void;
  /** Runs admitted (leased to this engine) that could not be started: their leases are to be let go. */
  unstarted: (runIds: string[]) => void;
}): GroupTail {
  const lease = o.args.lease;
  const headValues = [o.args.capacity, o.args.engine ?? null, lease?.owner ?? null, lease ? lease.ttlMs / 1000 : null];
  return {
    next() {
      if (!o.running()) return null;
      const mark = o.pump.roundElsewhere();
      // With nothing admissible known to wait, a round after the acceptances would find nothing to
      // admit: the group goes without it (a run it queues asks the pump for a round, below).
      const withRound = !o.pump.knownClean;
      const values = admitValues(o.args);
      return {
        head: [[TRY_LOCK_ADMISSION_FOR_ACCEPTANCES, headValues]],
        statements: withRound ? [[ADMIT_QUEUED_IF_LOCKED, values]] : [],
        done(results) {
          if (!results) return false;
          const [lockResult] = results.head as Rows[];
          const [admitResult] = results.tail as Rows[];
          const group = (results.group as Rows[]).map((r) => r.rows[0]);
          let covered: boolean;
          let round: ReturnType<typeof admitted> | null = null;
          if (withRound) {
            const first = admitResult?.rows[0];
            covered = first?.locked === true;
            if (covered) {
              o.pump.roundElsewhereDone(Number(first.looked_at) > Number(first.picked_count), mark);
              round = admitted(admitResult!.rows);
            }
          } else {
            // Without a round, a run the group queued (behind another process's, or at a limit) is
            // not answered for: its acceptance asks the pump for one, as without the lock.
            covered = lockResult?.rows[0]?.locked === 'true' && group.every((row) => !row?.inserted || Boolean(row.admitted_id));
          }
          // The runs admitted: by their acceptance (its row's `admitted_id`), then by the round after them.
          const runs = [...group.flatMap((row) => (row?.admitted_id ? [{ ...row, id: row.admitted_id }] : [])), ...(round?.rows ?? [])];
          const start = async () => {
            // Through the ORM's query log like every statement (counts, slow-query logs).
            const em = outsideTransaction(o.deps.orm);
            await loggedRows(em, TRY_LOCK_ADMISSION_FOR_ACCEPTANCES, headValues, lockResult);
            if (withRound) await loggedRows(em, ADMIT_QUEUED_IF_LOCKED, values, admitResult);
            if (runs.length === 0) return;
            const states = await Promise.all(runs.map((row) => stateFromRow(em, String(row.id), row)));
            o.admitted({ admitted: states.map((st) => st.runId), states, more: round?.more ?? false });
          };
          // After the group's callers have answered: a POST /runs response is written before its run's
          // first step is computed. A run that cannot be started is let go rather than left leased
          // until its lease expires.
          setImmediate(() =>
            start().catch((err) => {
              o.failed(err);
              if (runs.length > 0) o.unstarted(runs.map((row) => String(row.id)));
            }),
          );
          return covered;
        },
      };
    },
  };
}
