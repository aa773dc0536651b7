import { statement } from '../db/statement.ts';
import { AccountSchema, RunSchema } from '../db/entities/index.ts';
import { inFlightRun, queuedRun } from '../db/entities/run-predicates.ts';

/** The runs queued per class, each counted up to $1 (`queued_0` … `queued_2`). */
const QUEUED_BY_CLASS = [0, 1, 2]
  .map((c) => `(select count(*) from (select 1 from runs where ${queuedRun()} and priority = ${c} limit $1::bigint) q)::int as queued_${c}`)
  .join(', ');

/**
 * The run queue's gauges in one statement per scrape (src/runs/queue-snapshot.ts, for src/observability/deployment-metrics.ts): runs in
 * flight, runs queued (counted up to $1, so the count stays cheap however deep the queue grows) and the
 * age of the oldest queued run in seconds (0 when the queue is empty), and the runs queued per priority
 * class (`queued_0` high, `queued_1` normal, `queued_2` low: runs_queue_fair_idx, each counted up to $1).
 * Then the concurrency key waiting longest: the account and key of the oldest keyed run among the first $1
 * runs admission takes (the fair index's order), and its age (null when none): one key whatever the number of keys.
 *
 * The in-flight predicate is admission's (src/db/entities/run-predicates.ts): running or suspended, or
 * admitted and being prepared. The queue's count and its oldest run come from the index of queued runs
 * (runs_queue_fair_idx): a bounded index-only count, and the earliest acceptance among its entries (a
 * walk of all its entries, linear in the queue's depth: the queue's order is not acceptance order, and an
 * index of its own for one gauge was tried and dropped, as stale statistics made place counts use it).
 */
export const QUEUE_SNAPSHOT = statement(
  'queue_snapshot',
  `select
    (select count(*) from runs where ${inFlightRun()})::int as in_flight,
    (select count(*) from (select 1 from runs where ${queuedRun()} limit $1::bigint) q)::int as queued,
    ${QUEUED_BY_CLASS},
    coalesce(extract(epoch from clock_timestamp() -
      (select min(queued_at) from runs where ${queuedRun()})), 0)::float8 as oldest,
    longest.handle as longest_key_account, longest.concurrency_key as longest_key,
    extract(epoch from clock_timestamp() - longest.queued_at)::float8 as longest_key_seconds
  from (select 1) as one_row left join lateral (
    select account.handle, head.concurrency_key, head.queued_at
      from (select account_id, concurrency_key, queued_at from runs where ${queuedRun()}
             order by priority, fair_pass, queued_at, id limit $1::bigint) head
      join accounts account on account.id = head.account_id
     where head.concurrency_key is not null
     order by head.queued_at limit 1) longest on true`,
  [RunSchema, AccountSchema],
);
