import { queuedRun } from '../db/entities/run-predicates.ts';

/**
 * A run's pass as it enters the queue (docs/design/flow-control.md#the-order), for the runs of alias `n`
 * (columns account_id, concurrency_key, priority, ord): the class's clock (the lowest pass queued in the
 * run's class, 0 for an empty class) plus one for a run without a concurrency key; for a keyed run, one
 * more than the later of that clock and its key's last queued pass in the class, counting the set's
 * earlier runs of the key. Index probes of runs_queue_fair_idx and runs_queue_key_idx. Taken at
 * acceptance, and again when a delayed start enters the queue (src/sql/scheduled-runs.ts).
 */
export const fairPass = (n: string): string => {
  const classClock = `(select coalesce(min(class_peer.fair_pass), 0) from runs class_peer
                      where ${queuedRun('class_peer')} and class_peer.priority = ${n}.priority)`;
  return `case when ${n}.concurrency_key is null
           then ${classClock} + 1
           else greatest(${classClock},
                         (select coalesce(max(key_peer.fair_pass), 0) from runs key_peer
                           where ${queuedRun('key_peer')} and key_peer.concurrency_key is not null and key_peer.account_id = ${n}.account_id
                             and key_peer.concurrency_key = ${n}.concurrency_key and key_peer.priority = ${n}.priority))
                + row_number() over (partition by ${n}.account_id, ${n}.concurrency_key, ${n}.priority order by ${n}.ord) end`;
};
