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
import type { NewRunEvent } from '../domain/run-steps.ts';
import { admittedRun, liveRun } from '../db/entities/run-predicates.ts';
import { MONEY_PLAN, MONEY_WRITES } from './run-money.ts';
import { outboxInsert } from './webhook-deliveries.ts';

/** One run to end, as FINISH_RUNS takes it (named fields of one JSON parameter). */
export interface RunEnding {
  runId: string;
  /** The run must be admitted and not started (else: not terminal yet). */
  admitted: boolean;
  /** The run starts and ends here, funded by this statement (a run computed in memory). */
  fundNow: boolean;
  /** Nodes that must have no result, delay nodes that must have no started timer (fences). */
  absentResults: readonly string[];
  absentTimers: readonly string[];
  /** n, or null: n more steps must stay within the compute limit. */
  limitSteps: number | null;
  /** Results merged into progress (null: progress kept), timers added and removed. */
  results: unknown;
  addTimers: Record<string, number>;
  removeTimers: readonly string[];
  /** Completed steps (compute += steps × step_usd + extra). */
  steps: number;
  extra: string;
  status: 'completed' | 'failed' | 'cancelled';
  outcome: string | null;
  reason: string | null;
  /** The outputs (null: kept). */
  outputs: unknown;
  /** What the ending charges, as wr_run_charge takes it: `none`, `compute` or `full`. */
  charged: 'none' | 'compute' | 'full';
  /** The events, in order. */
  events: readonly NewRunEvent[];
  /** A channel to NOTIFY the runs written on in this transaction (`<id>:<last_sequence>,…`), or null. */
  channel: string | null;
}

/**
 * Ends runs: ONE statement for any number of them, a single run being a set of one, called by every way
 * a run ends (src/runs/finish-run.ts): the engines, cancellation, the queue and credentials timeouts, a
 * run refused funding, and runs computed in memory (started, their steps recorded, funded and ended at
 * once). Per run, nothing is written unless its fences hold (admitted, or not terminal; the results and
 * timers absent; the compute limit); then its terminal state, progress and compute, its charge
 * (`wr_run_charge`, billed through `wr_billed`: docs/design/money.md#what-is-charged), its events, its
 * secrets deleted, the webhook outbox of its terminal event, a completed run counted on its workflow's
 * tally, and its money moved by MONEY_PLAN and MONEY_WRITES (src/sql/run-money.ts): a hold released and
 * the charge taken from the wallet, or a bundle run given back when it is not charged. A run funded here
 * whose hold its wallet does not cover is not written (`written` false). Rows are locked runs, bundles,
 * wallets, then tallies, each in call order or id order.
 *
 * Answers one row per run whose fences held: `ord`, `id`, `account_id`, `written`, the new
 * `last_sequence`, `events_ts`, the number of `webhooks` queued and whether it was `notified`.
 */
export const FINISH_RUNS = statement(
  'finish_runs',
  `with recursive call as (
  select * from jsonb_to_recordset($1::jsonb)
         as call(ord bigint, run_id uuid, admitted boolean, fund_now boolean, absent_results text[], absent_timers text[], limit_steps int,
                 results jsonb, add_timers jsonb, remove_timers text[], steps int, extra numeric, status text, outcome text, reason text,
                 outputs jsonb, charged text, types text[], node_ids text[], data jsonb[], channel text)),
fenced as (
  select call.*, r.account_id, r.workflow_id, r.version_id, r.displayed_price_usd, r.creator_price_usd, r.funding, r.bundle_id, r.hold_usd,
         r.compute_usd + call.steps * r.step_usd + call.extra as compute
    from call join runs r on r.id = call.run_id
   where case when call.admitted then ${admittedRun('r')} else ${liveRun('r')} end
     and not jsonb_exists_any(coalesce(r.progress->'results', '{}'::jsonb), call.absent_results)
     and not jsonb_exists_any(coalesce(r.progress->'timers', '{}'::jsonb), call.absent_timers)
     and wr_within_compute_limit(r.compute_usd, call.limit_steps, r.step_usd, r.compute_limit_usd)
   order by call.ord
     for update of r),
money_call as (
  select f.ord, f.run_id, f.account_id, f.workflow_id, f.version_id, f.fund_now, f.displayed_price_usd as price, f.funding as funded_by,
         f.bundle_id as funded_bundle, f.hold_usd as held, true as ending, wr_run_charge(f.charged, f.status, f.creator_price_usd, f.compute) as charge
    from fenced f),
${MONEY_PLAN},
finished as (
  update runs r set
    last_sequence = r.last_sequence + cardinality(f.types),
    updated_at = now(),
    status = f.status, outcome = f.outcome, reason = f.reason, outputs = coalesce(f.outputs, r.outputs),
    phase = null, suspend_reason = null, resume_at = null, lease_owner = null, lease_until = null,
    started_at = case when f.fund_now then clock_timestamp() else r.started_at end, completed_at = clock_timestamp(),
    progress = case when f.results is null then r.progress else r.progress || jsonb_build_object(
      'results', coalesce(r.progress->'results', '{}'::jsonb) || f.results,
      'timers', (coalesce(r.progress->'timers', '{}'::jsonb) || f.add_timers) - f.remove_timers) end,
    compute_usd = f.compute,
    steps_executed = r.steps_executed + f.steps,
    billing_status = case when moved.billed is null then 'not_charged' else 'settled' end, charge_usd = moved.billed,
    cap_usd = coalesce(moved.billed, 0),
    funding = case when not f.fund_now then r.funding when moved.bundle_id is null then 'wallet' else 'bundle' end,
    bundle_id = case when f.fund_now then coalesce(moved.bundle_id, r.bundle_id) else r.bundle_id end,
    hold_usd = case when f.fund_now then moved.taken else r.hold_usd end
  from fenced f join money_moved moved on moved.ord = f.ord
  where r.id = f.run_id
  returning f.ord, r.id, r.account_id, r.workflow_id, r.status, r.last_sequence),
events as (
  insert into run_event_batches (run_id, last_sequence, types, node_ids, data, ts)
  select finished.id, finished.last_sequence, call.types, call.node_ids, call.data, clock_timestamp()
    from finished join call on call.ord = finished.ord
   where cardinality(call.types) > 0
  returning run_id, ts),
secrets as (delete from run_secrets where run_id in (select id from finished)),
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
  returning run_id),
${MONEY_WRITES}
select fenced.ord, fenced.run_id as id, fenced.account_id, finished.id is not null as written, finished.last_sequence, events.ts as events_ts,
       (select count(*) from outbox where outbox.run_id = fenced.run_id)::int as webhooks, notice.sent > 0 and finished.id is not null as notified
  from fenced left join finished on finished.ord = fenced.ord left join events on events.run_id = finished.id cross join notice`,
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

/** FINISH_RUNS's one parameter: the calls as a JSON array of named fields (`ord`: the call's place from 1). */
export function finishRunsValues(calls: readonly RunEnding[]): unknown[] {
  const rows = calls.map((c, i) => ({
    ord: i + 1,
    run_id: c.runId,
    admitted: c.admitted,
    fund_now: c.fundNow,
    absent_results: c.absentResults,
    absent_timers: c.absentTimers,
    limit_steps: c.limitSteps,
    results: c.results,
    add_timers: c.addTimers,
    remove_timers: c.removeTimers,
    steps: c.steps,
    extra: c.extra,
    status: c.status,
    outcome: c.outcome,
    reason: c.reason,
    outputs: c.outputs,
    charged: c.charged,
    types: c.events.map((e) => e.type),
    node_ids: c.events.map((e) => e.nodeId ?? null),
    data: c.events.map((e) => e.data ?? {}),
    channel: c.channel,
  }));
  return [JSON.stringify(rows)];
}
