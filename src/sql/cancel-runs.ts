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
} from '../db/entities/index.ts';
import { liveRun } from '../db/entities/run-predicates.ts';
import { billingSet } from './runs.ts';
import { outboxInsert } from './webhook-deliveries.ts';

/**
 * Cancels the runs of $1 (uuid[]) that are not terminal, ONE statement for any number of them (a single
 * cancel is a set of one: src/runs/cancel-run.ts). Each is finished exactly as FINISH_RUN finishes a run
 * whose ending charges `none` (wr_run_charge gives null for it, so it is billed nothing and marked
 * `not_charged`): status `cancelled`, its `run.cancelled` event, its secrets deleted, the webhook outbox of
 * the event; then its funding settled as src/billing/settle-run.ts settles an uncharged run: a bundle run
 * is given back to its bundle, a wallet hold is released with its `release` ledger row (the balance after
 * each, run after run in id order). Rows are locked in id order (runs, then bundles, then wallets), the
 * order every finishing path takes. A run terminal already, or missing, is left alone and not answered.
 *
 * Answers one row per run it cancelled: `id`, `account_id`, its new `last_sequence`, the `events_ts` of its
 * event and the number of `webhooks` queued.
 */
export const CANCEL_RUNS = statement(
  'cancel_runs',
  `with locked as (
  select r.id, r.account_id, r.funding, r.bundle_id, r.hold_usd from runs r
   where r.id = any($1::uuid[]) and ${liveRun('r')}
   order by r.id
     for update of r),
finished as (
  update runs r set status = 'cancelled', outcome = null, reason = null, ${billingSet('null::numeric')},
         phase = null, suspend_reason = null, resume_at = null,
         lease_owner = null, lease_until = null, completed_at = clock_timestamp(), updated_at = now(),
         last_sequence = r.last_sequence + 1
    from locked
   where r.id = locked.id
  returning r.id, r.account_id, r.last_sequence, locked.funding, locked.bundle_id, locked.hold_usd),
events as (
  insert into run_event_batches (run_id, last_sequence, types, node_ids, data, ts)
  select finished.id, finished.last_sequence, array['run.cancelled']::text[], array[null]::text[], array['{"status":"cancelled"}'::jsonb], clock_timestamp()
    from finished
  returning run_id, ts),
secrets as (delete from run_secrets where run_id in (select id from finished)),
outbox as (
  ${outboxInsert({ from: 'finished', run: 'finished.id', event: `'run.cancelled'::text`, account: 'finished.account_id' })}
  returning run_id),
given_back as (
  select finished.bundle_id, count(*) as given from finished
   where finished.funding = 'bundle' and finished.bundle_id is not null group by finished.bundle_id),
bundle_locked as (
  select bundles.id from bundles where bundles.id in (select bundle_id from given_back) order by bundles.id for update of bundles),
bundle_settled as (
  update bundles set runs_left = bundles.runs_left + given_back.given
    from given_back join bundle_locked on bundle_locked.id = given_back.bundle_id
   where bundles.id = given_back.bundle_id),
released as (
  select finished.account_id, finished.id, finished.hold_usd,
         sum(finished.hold_usd) over (partition by finished.account_id order by finished.id) as released_through
    from finished
   where not (finished.funding = 'bundle' and finished.bundle_id is not null) and finished.hold_usd <> 0),
wallet_locked as (
  select wallets.account_id, wallets.balance_usd from wallets
   where wallets.account_id in (select account_id from released)
   order by wallets.account_id
     for update of wallets),
wallet_settled as (
  update wallets set balance_usd = wallets.balance_usd + total.usd, held_usd = wallets.held_usd - total.usd, updated_at = now()
    from (select released.account_id, sum(released.hold_usd) as usd from released group by released.account_id) total
    join wallet_locked on wallet_locked.account_id = total.account_id
   where wallets.account_id = total.account_id),
ledger as (
  insert into ledger_entries (account_id, run_id, kind, amount_usd, balance_after_usd, note, created_at)
  select released.account_id, released.id, 'release', released.hold_usd, wallet_locked.balance_usd + released.released_through,
         'hold released at settlement', now()
    from released join wallet_locked on wallet_locked.account_id = released.account_id
   order by released.account_id, released.id)
select finished.id, finished.account_id, finished.last_sequence, events.ts as events_ts, coalesce(queued.webhooks, 0) as webhooks
  from finished join events on events.run_id = finished.id
  left join (select outbox.run_id, count(*)::int as webhooks from outbox group by outbox.run_id) queued on queued.run_id = finished.id`,
  [RunSchema, RunEventBatchSchema, RunSecretSchema, WebhookDeliverySchema, WebhookEndpointSchema, BundleSchema, WalletSchema, LedgerEntrySchema],
);
