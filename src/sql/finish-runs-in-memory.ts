import { statement } from '../db/statement.ts';
import {
  BundleSchema,
  LedgerEntrySchema,
  RunEventBatchSchema,
  RunSchema,
  RunSecretSchema,
  WalletSchema,
  WebhookDeliverySchema,
  WebhookEndpointSchema,
  WorkflowRunTallySchema,
} from '../db/entities/index.ts';
import { admittedRun } from '../db/entities/run-predicates.ts';
import { billingSet, runColumnsOf } from './runs.ts';
import { ledgerRows } from './settle-run.ts';
import { outboxInsert } from './webhook-deliveries.ts';

/** The SQL text array of a JSON array of texts (an SQL expression). */
const texts = (json: string) => `array(select jsonb_array_elements_text(${json}))`;

/**
 * Admitted runs computed entirely in memory (src/runs/start-and-complete.ts), each started, its steps
 * recorded, funded, finished and settled: ONE statement over arrays, a single run being a batch of one
 * (src/db/batch.ts). Per call (one element of each array, in the order of the calls):
 *
 * $1 run id. Fences, on the run as it is now (nothing is written for a run unless every one holds):
 * pending and admitted; $2 nodes (a JSON array) that must have no result, $3 delay nodes that must have
 * no started timer; $4 n or null: n more steps stay within the compute limit (wr_within_compute_limit).
 * What it writes: $5 results merged into progress (JSON, null: progress kept) with $6 timers added and
 * $7 removed (a JSON array); $8 completed steps (compute += $8 × step_usd + $9); $10 terminal status,
 * $11 outcome, $12 reason, $13 outputs (JSON or null: kept); $14 what the ending charges (`none`,
 * `compute`, `full`) as wr_run_charge takes it, billed through wr_billed: the one definition of the
 * charge (src/db/entities/routines.ts, docs/design/money.md). The events of every call are $15–$18,
 * one element per event: the call's place (from 1), type, node id, data. $19 a channel or null: when a
 * call brings one (the run event bus lets it: claimNotify in src/runs/run-event-bus.ts), the runs
 * written are notified on it (`<id>:<last_sequence>,…`, as the bus writes it) in this transaction.
 *
 * Funding, run after run in call order: the bundle of the run's account, workflow and version (one at
 * most) pays while it has runs left (a run not charged is marked bundle-funded and takes none, as
 * finishing a bundle run that is not charged gives its run back), else the wallet: its hold (the displayed price) is taken and released
 * at once and the charge taken from the balance, never below zero, the rest recorded as unpaid, with
 * the ledger rows of every settlement (ledgerRows). A wallet run whose hold the balance left by the runs
 * before it does not cover is not written at all (nor is one of an account without a wallet). A run
 * neither bundle nor wallet pays anything for leaves the wallet alone. Then the run's events, its
 * secrets deleted, the webhook outbox of its terminal event, and a completed run counted on its
 * workflow's tally.
 *
 * Answers one row per call whose fences held (`ord`): `written` false when the wallet refused it, else
 * the run's `account_id`, new `last_sequence`, the number of `webhooks` queued and whether it was `notified`.
 */
export const FINISH_RUNS_IN_MEMORY = statement(
  'finish_runs_in_memory',
  `with recursive call as (
  select given.ord, given.run_id, ${texts('given.absent_results')} as absent_results, ${texts('given.absent_timers')} as absent_timers,
         given.limit_steps, given.results, given.add_timers, ${texts('given.remove_timers')} as remove_timers, given.steps, given.extra,
         given.status, given.outcome, given.reason, given.outputs, given.charged, given.channel
    from unnest($1::uuid[], $2::jsonb[], $3::jsonb[], $4::int[], $5::jsonb[], $6::jsonb[], $7::jsonb[], $8::int[], $9::numeric[],
                $10::text[], $11::text[], $12::text[], $13::jsonb[], $14::text[], $19::text[])
         with ordinality as given(run_id, absent_results, absent_timers, limit_steps, results, add_timers, remove_timers, steps, extra,
                              status, outcome, reason, outputs, charged, channel, ord)),
call_events as (
  select event.ord, array_agg(event.type order by event.n) as types, array_agg(event.node_id order by event.n) as node_ids,
         array_agg(event.data order by event.n) as data
    from unnest($15::int[], $16::text[], $17::text[], $18::jsonb[]) with ordinality as event(ord, type, node_id, data, n)
   group by event.ord),
fenced as (
  select call.*, r.account_id, r.workflow_id, r.version_id, r.displayed_price_usd, r.creator_price_usd,
         r.compute_usd + call.steps * r.step_usd + call.extra as compute
    from call join runs r on r.id = call.run_id
   where ${admittedRun('r')}
     and not jsonb_exists_any(coalesce(r.progress->'results', '{}'::jsonb), call.absent_results)
     and not jsonb_exists_any(coalesce(r.progress->'timers', '{}'::jsonb), call.absent_timers)
     and wr_within_compute_limit(r.compute_usd, call.limit_steps, r.step_usd, r.compute_limit_usd)
   order by call.ord
     for update of r),
priced as (
  select fenced.*, wr_run_charge(fenced.charged, fenced.status, fenced.creator_price_usd, fenced.compute) as charge from fenced),
bundle_locked as (
  select bundle_row.id, bundle_row.account_id, bundle_row.workflow_id, bundle_row.version_id, bundle_row.usd_per_run, bundle_row.runs_left
    from bundles bundle_row
   where bundle_row.runs_left > 0
     and exists (select 1 from priced where priced.account_id = bundle_row.account_id and priced.workflow_id = bundle_row.workflow_id
                                         and priced.version_id = bundle_row.version_id)
   order by bundle_row.id
     for update of bundle_row),
bundle_place as (
  select priced.*,
         count(*) filter (where priced.charge is not null)
           over (partition by account_id, workflow_id, version_id order by ord rows between unbounded preceding and 1 preceding) as charged_before
    from priced),
funded as (
  select placed.*, bundle.id as bundle_id, bundle.usd_per_run, wr_billed(placed.charge, bundle.usd_per_run) as billed,
         case when bundle.id is null then placed.displayed_price_usd else 0 end as hold,
         case when bundle.id is null then coalesce(wr_billed(placed.charge, null), 0) else 0 end as take
    from bundle_place placed
    left join bundle_locked bundle on bundle.account_id = placed.account_id and bundle.workflow_id = placed.workflow_id
                                  and bundle.version_id = placed.version_id and placed.charged_before < bundle.runs_left),
wallet_run as (
  select funded.ord, funded.account_id, funded.hold, funded.take, row_number() over (partition by account_id order by ord) as n
    from funded where bundle_id is null and (hold <> 0 or take <> 0)),
wallet_locked as (
  select wallets.account_id, wallets.balance_usd from wallets
   where wallets.account_id in (select account_id from wallet_run)
   order by wallets.account_id
     for update of wallets),
wallet_fold(account_id, n, ord, opening, closing, covered) as (
  select account_id, 0::bigint, 0::bigint, balance_usd::numeric, balance_usd::numeric, false from wallet_locked
  union all
  select folded.account_id, next_run.n, next_run.ord, folded.closing,
         case when folded.closing >= next_run.hold then folded.closing - least(next_run.take, folded.closing) else folded.closing end,
         folded.closing >= next_run.hold
    from wallet_fold folded join wallet_run next_run on next_run.account_id = folded.account_id and next_run.n = folded.n + 1),
written as (
  select funded.* from funded
   where funded.ord not in (select ord from wallet_run) or funded.ord in (select ord from wallet_fold where covered)),
finished as (
  update runs r set
    last_sequence = r.last_sequence + coalesce(cardinality(batch.types), 0),
    updated_at = now(),
    status = written.status, outcome = written.outcome, reason = written.reason, outputs = coalesce(written.outputs, r.outputs),
    phase = null, suspend_reason = null, resume_at = null, lease_owner = null, lease_until = null,
    started_at = clock_timestamp(), completed_at = clock_timestamp(),
    progress = case when written.results is null then r.progress else r.progress || jsonb_build_object(
      'results', coalesce(r.progress->'results', '{}'::jsonb) || written.results,
      'timers', (coalesce(r.progress->'timers', '{}'::jsonb) || written.add_timers) - written.remove_timers) end,
    compute_usd = written.compute,
    hold_usd = written.hold,
    ${billingSet('written.billed')},
    steps_executed = r.steps_executed + written.steps,
    funding = case when written.bundle_id is null then 'wallet' else 'bundle' end,
    bundle_id = coalesce(written.bundle_id, r.bundle_id)
  from written left join call_events batch on batch.ord = written.ord
  where r.id = written.run_id
  returning written.ord, ${runColumnsOf('r')}),
events as (
  insert into run_event_batches (run_id, last_sequence, types, node_ids, data, ts)
  select finished.id, finished.last_sequence, batch.types, batch.node_ids, batch.data, clock_timestamp()
    from finished join call_events batch on batch.ord = finished.ord),
secrets as (delete from run_secrets where run_id in (select id from finished)),
bundle_taken as (
  update bundles set runs_left = bundles.runs_left - taken.given
    from (select bundle_id, count(*) as given from written where bundle_id is not null and charge is not null group by bundle_id) taken
   where bundles.id = taken.bundle_id),
wallet_settled as (
  update wallets set balance_usd = last.closing, updated_at = now()
    from (select distinct on (account_id) account_id, closing from wallet_fold order by account_id, n desc) last
   where wallets.account_id = last.account_id and last.account_id in (select account_id from wallet_fold where covered)),
ledger as (
  insert into ledger_entries (account_id, run_id, kind, amount_usd, balance_after_usd, note, created_at)
  select wallet_fold.account_id, written.run_id, k.kind, k.amount, k.after, k.note, now()
    from wallet_fold join written on written.ord = wallet_fold.ord
         ${ledgerRows({ balance: 'wallet_fold.opening', taken: 'written.hold', hold: 'written.hold', take: 'written.take' })}
   where wallet_fold.covered and k.written
   order by wallet_fold.ord, k.n),
tally as (
  insert into workflow_run_tallies (workflow_id, shard, runs)
  select finished.workflow_id, pg_backend_pid() % 16, count(*) from finished
   where finished.status = 'completed' group by finished.workflow_id order by finished.workflow_id
  on conflict (workflow_id, shard) do update set runs = workflow_run_tallies.runs + excluded.runs),
notified as (
  select min(call.channel) as channel, string_agg(finished.id::text || ':' || finished.last_sequence, ',' order by finished.ord) as told
    from finished join call on call.ord = finished.ord
  having min(call.channel) is not null),
notice as (select count(pg_notify(notified.channel, notified.told)) as sent from notified),
outbox as (
  ${outboxInsert({ from: 'finished', run: 'finished.id', event: `'run.' || finished.status`, account: 'finished.account_id' })}
  returning run_id)
select fenced.ord, fenced.account_id, finished.id is not null as written, finished.last_sequence,
       (select count(*) from outbox where outbox.run_id = fenced.run_id)::int as webhooks, notice.sent > 0 and finished.id is not null as notified
  from fenced left join finished on finished.ord = fenced.ord cross join notice`,
  [
    RunSchema,
    BundleSchema,
    WalletSchema,
    LedgerEntrySchema,
    RunEventBatchSchema,
    RunSecretSchema,
    WorkflowRunTallySchema,
    WebhookDeliverySchema,
    WebhookEndpointSchema,
  ],
);
