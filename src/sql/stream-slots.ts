import { statement } from '../db/statement.ts';
import { StreamSlotLeaseSchema, StreamSlotTotalSchema } from '../db/entities/index.ts';

/**
 * Open-stream counts shared by every process (src/runs/stream-slots.ts): a total per holder
 * (`stream_slot_totals`) and what each process holds of it (`stream_slot_leases`, with a lease).
 */

/**
 * $1 holder, $2 limit, $3 process id, $4 lease seconds: one more open stream unless the holder's total
 * is at the limit (no row then). The total's row lock makes the check and the count one step.
 */
export const ACQUIRE_STREAM_SLOT = statement(
  'acquire_stream_slot',
  `with counted as (
  insert into stream_slot_totals as total (holder, open) values ($1, 1)
  on conflict (holder) do update set open = total.open + 1 where total.open < $2
  returning holder)
insert into stream_slot_leases as lease (holder, process_id, open, lease_until)
select holder, $3, 1, now() + make_interval(secs => $4) from counted
on conflict (holder, process_id) do update set open = lease.open + 1, lease_until = excluded.lease_until
returning open`,
  [StreamSlotTotalSchema, StreamSlotLeaseSchema],
);

/** $1 holder, $2 process id. The total first, then the lease: ACQUIRE_STREAM_SLOT's row order, so the two never deadlock. */
export const RELEASE_STREAM_SLOT = statement(
  'release_stream_slot',
  `with uncounted as (
  update stream_slot_totals set open = open - 1
   where holder = $1 and open > 0
     and exists (select 1 from stream_slot_leases where holder = $1 and process_id = $2 and open > 0)
  returning holder)
update stream_slot_leases lease set open = lease.open - 1 from uncounted where lease.holder = uncounted.holder and lease.process_id = $2`,
  [StreamSlotTotalSchema, StreamSlotLeaseSchema],
);

/** $1 lease seconds, $2 process id. */
export const RENEW_STREAM_SLOT_LEASES = statement(
  'renew_stream_slot_leases',
  'update stream_slot_leases set lease_until = now() + make_interval(secs => $1) where process_id = $2',
  [StreamSlotLeaseSchema],
);

/**
 * Drops leases and takes their slots off the totals: $1 a process id (its leases, at shutdown), or null
 * (every expired lease, of processes that died without giving their slots back).
 */
export const DROP_STREAM_SLOT_LEASES = statement(
  'drop_stream_slot_leases',
  `with dead as (delete from stream_slot_leases where case when $1::text is null then lease_until < now() else process_id = $1::text end
  returning holder, open)
update stream_slot_totals t set open = greatest(0, t.open - d.open)
  from (select holder, sum(open)::int as open from dead group by holder) d where t.holder = d.holder`,
  [StreamSlotLeaseSchema, StreamSlotTotalSchema],
);
