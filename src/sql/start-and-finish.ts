import { lastOfTransaction } from '../db/prepared.ts';
import { statement } from '../db/statement.ts';
import {
  BundleSchema,
  LedgerEntrySchema,
  RunEventBatchSchema,
  RunSchema,
  RunSecretSchema,
  WalletSchema,
  WebhookEndpointSchema,
  WorkflowRunTallySchema,
} from '../db/entities/index.ts';
import { takeBundleCte } from './fund-run.ts';
import { admittedRun } from './run-predicates.ts';
import { runEventsCte } from './run-events.ts';
import { billingSet, RUN_COLUMNS } from './runs.ts';
import { countCompletedRunCte, settleWalletCtes, walletSettled } from './settle-run.ts';
import { endpointTakes } from './webhook-deliveries.ts';

/**
 * An admitted run computed entirely in memory (src/runs/complete-run.ts) is started, its steps
 * recorded, funded and made terminal in ONE update of its row: one row version and one set of index
 * entries instead of three (start, funding, finish), and one round trip. What it writes is what the
 * start (FENCED_WRITE_STATE), the funding mark (a bundle pays now, else the wallet hold is recorded for
 * the settlement to take: docs/design/money.md) and FINISH_RUN write one after another.
 *
 * Both statements below take the same parameters.
 * Fences, all on the run as it is now (nothing is written unless every one holds): $1 run id, pending
 * and admitted (phase starting or preparing); $2 nodes that must have no result, $3 delay nodes that
 * must have no started timer; $4 n or null: n more steps must stay within the compute limit
 * (wr_within_compute_limit).
 * What it writes: $5 results merged into progress with $6 timers added and $7 removed (null $5:
 * progress kept); $8 completed steps (compute += $8 × step_usd + $9); $10–$12 the events (types, node
 * ids, JSON data: run.preparing, run.started, the steps', the terminal one); $13 terminal status,
 * $14 outcome, $15 reason, $16 outputs (JSON or null: kept); $17 what the ending charges (`none`,
 * `compute`, `full`), as wr_run_charge takes it; a bundle run is billed its bundle's price (wr_billed).
 * Both are the one definition of the charge (src/db/entities/routines.ts, docs/design/money.md).
 */

/**
 * What the run's one update sets, in both statements here and START_FINISH_AND_SETTLE_MANY
 * (src/sql/start-finish-and-settle-many.ts), from the CTE `p` (`compute`, `hold`, `billed` from wr_billed): the
 * terminal run's cleared columns and times, its progress (results merged, timers added and removed,
 * kept when `results` is null), its compute and its billing. SQL expressions for the three parts of
 * the progress.
 */
export const finishedRunSet = (a: { results: string; addTimers: string; removeTimers: string }) => `phase = null, suspend_reason = null, resume_at = null,
    lease_owner = null, lease_until = null,
    started_at = clock_timestamp(), completed_at = clock_timestamp(),
    progress = case when ${a.results} is null then r.progress else r.progress || jsonb_build_object(
      'results', coalesce(r.progress->'results', '{}'::jsonb) || ${a.results},
      'timers', (coalesce(r.progress->'timers', '{}'::jsonb) || ${a.addTimers}) - ${a.removeTimers}) end,
    compute_usd = p.compute,
    hold_usd = p.hold,
    ${billingSet('p.billed')}`;

/**
 * The fences on the run `r` (see above): admitted and pending, no result for `absentResults`, no
 * started timer for `absentTimers`, `limitSteps` more steps within its compute limit. SQL expressions;
 * shared with START_FINISH_AND_SETTLE_MANY.
 */
export const runFences = (a: { absentResults: string; absentTimers: string; limitSteps: string }) => `${admittedRun('r')}
     and not jsonb_exists_any(coalesce(r.progress->'results', '{}'::jsonb), ${a.absentResults})
     and not jsonb_exists_any(coalesce(r.progress->'timers', '{}'::jsonb), ${a.absentTimers})
     and wr_within_compute_limit(r.compute_usd, ${a.limitSteps}, r.step_usd, r.compute_limit_usd)`;

/** The run under its row lock, where every fence holds (the body of CTE `f`). */
const FENCED_RUN = `select r.id, r.account_id, r.workflow_id, r.version_id, r.displayed_price_usd,
         r.compute_usd + $8::int * r.step_usd + $9::numeric as compute, r.creator_price_usd
    from runs r
   where r.id = $1::uuid and ${runFences({ absentResults: '$2::text[]', absentTimers: '$3::text[]', limitSteps: '$4::int' })}
     for update of r`;

/**
 * From `f`: the charge (`c`), the bundle that pays (`b`, given `bundleRuns` for the pick, see
 * takeBundleCte), the funding and what is billed (`p`: `hold` the wallet hold, `take` what a wallet
 * pays), the run's one update (`u`), its events (`e`, returning its batch when `eventsReturning`)
 * and its secrets deleted (`s`).
 */
const startAndFinishCtes = (bundleRuns?: string, eventsReturning = false) => `c as (
  select f.*, wr_run_charge($17::text, $13::text, f.creator_price_usd, f.compute) as charge from f),
${takeBundleCte({ from: ', c', account: 'c.account_id', workflow: 'c.workflow_id', version: 'c.version_id', runs: bundleRuns })},
p as (
  select c.*, b.id as bundle_id, x.billed,
         case when b.id is null then c.displayed_price_usd else 0 end as hold,
         case when b.id is null then coalesce(x.billed, 0) else 0 end as take
    from c left join b on true, lateral (select wr_billed(c.charge, b.usd_per_run) as billed) x),
u as (
  update runs r set
    last_sequence = r.last_sequence + cardinality($10::text[]),
    updated_at = now(),
    status = $13::text, outcome = $14::text, reason = $15::text, outputs = coalesce($16::jsonb, r.outputs),
    ${finishedRunSet({ results: '$5::jsonb', addTimers: '$6::jsonb', removeTimers: '$7::text[]' })},
    steps_executed = r.steps_executed + $8::int,
    funding = case when p.bundle_id is null then 'wallet' else 'bundle' end,
    bundle_id = coalesce(p.bundle_id, r.bundle_id)
  from p
  where r.id = p.id
  returning ${RUN_COLUMNS.replace(/(\w+)/g, 'r.$1')}, r.funding, r.bundle_id, r.hold_usd),
${runEventsCte('$10', '$11', '$12', { returning: eventsReturning })},
s as (delete from run_secrets where run_id in (select id from u))`;

/**
 * The run started, recorded, funded and finished; its webhook outbox and settlement follow in the same
 * transaction (src/runs/finish-run.ts settleFinished). Returns the run's columns (RUN_COLUMNS, `charge_usd`
 * what it is billed, null: not charged, as settleRun takes it), its funding, bundle and hold, or no row
 * when a fence did not hold.
 */
export const START_AND_FINISH = statement(
  'start_and_finish',
  `with f as (${FENCED_RUN}),
${startAndFinishCtes()}
select * from u`,
  [RunSchema, BundleSchema, RunEventBatchSchema, RunSecretSchema],
);

/** The wallet is settled when the wallet funds the run and there is a hold or a charge. */
const WALLET_SETTLES = 'p.bundle_id is null and (p.hold <> 0 or p.take <> 0)';
/**
 * The run's events are inserted before the wallet row is locked: a CTE nothing reads runs after the
 * main query, which would hold the account's wallet row through their inserts. (Always true: a run has events.)
 */
const EVENTS_FIRST = '(select count(*) from e) > 0';

/**
 * START_AND_FINISH and the settlement in ONE statement, the whole transaction of a run whose account has
 * no webhook endpoint subscribed to its terminal event (no outbox row to write): sent with its BEGIN and
 * its COMMIT in one message on a Postgres server (lastOfTransaction). The settlement is settleRun's
 * with the hold taken at settlement (SETTLE_WALLET's CTEs: hold taken fenced on the balance, released,
 * charge, unpaid, the same ledger rows), or the bundle's (a run not charged gives its bundle run back: the
 * pick takes none), and a completed run is counted on its workflow's tally.
 *
 * Fence `h`: an endpoint of the account that would receive the terminal event (as ENQUEUE_RUN_WEBHOOKS
 * picks them, in this statement's snapshot) stops every write; the caller then takes the path that writes
 * the outbox. Returns no row when a fence of the run did not hold, else one row: the run's `account_id`,
 * `hooked` (then nothing was written) and its new `last_sequence`. Raises (wr_refuse, SQLSTATE WR001) when the balance does not
 * cover the hold: nothing is written and the COMMIT sent with it does not happen.
 */
export const START_FINISH_AND_SETTLE = statement(
  'start_finish_and_settle',
  lastOfTransaction(`with f0 as (${FENCED_RUN}),
h as (
  select exists (select 1 from webhook_endpoints we join f0 on we.account_id = f0.account_id
                  where ${endpointTakes('we', `'run.' || $13::text`)}) as hooked),
f as (select f0.* from f0, h where not h.hooked),
${startAndFinishCtes('(select count(*)::int from c where c.charge is not null)', true)},
${settleWalletCtes({
  from: 'p', where: `${WALLET_SETTLES} and ${EVENTS_FIRST}`, account: 'p.account_id', run: 'p.id', hold: 'p.hold', take: 'p.take', taken: 'p.hold',
})},
${countCompletedRunCte({ from: 'u', workflow: 'u.workflow_id', where: `u.status = 'completed'` })}
select f0.account_id, h.hooked, u.last_sequence, ${walletSettled(`exists (select 1 from p where ${WALLET_SETTLES})`)}
  from f0 cross join h left join u on true`),
  [RunSchema, WebhookEndpointSchema, BundleSchema, RunEventBatchSchema, RunSecretSchema, WalletSchema, LedgerEntrySchema, WorkflowRunTallySchema],
);
