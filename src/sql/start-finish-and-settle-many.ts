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
import { ledgerRows } from './settle-run.ts';
import { finishedRunSet, runFences } from './start-and-finish.ts';
import { endpointTakes } from './webhook-deliveries.ts';

/**
 * The SQL array of the elements of `json` (a JSON array's text), in order; null for null, as the single
 * statement's null array parameter (its fences then fail, as they do there).
 */
const sqlArray = (json: string, elements = 'jsonb_array_elements_text') =>
  `case when ${json} is not null then array(select v from ${elements}(${json}::jsonb) with ordinality a(v, n) order by n) end`;

/**
 * START_FINISH_AND_SETTLE (src/sql/start-and-finish.ts) for a group of runs as ONE set-based statement:
 * what N executions of it in one transaction write, in one execution. Postgres spends about as much
 * starting and ending the executor of that statement (its plan has some twenty nodes, five of them
 * writing tables) as on the rows it writes, so a group commit (src/db/group-commit.ts) that sends the
 * group as this statement pays that once. See docs/round-trips.md#a-group-of-settlements-as-one-statement.
 *
 * Each parameter is an array with one element per run, in the group's order, standing for the single
 * statement's parameter of the same number. A single statement's array parameters ($2, $3, $7, $10–$12)
 * are JSON arrays here (a Postgres array cannot hold arrays of different lengths); $12 holds the event
 * data values themselves. $9 holds numeric texts.
 *
 * It writes exactly what the single statements would, run after run, when it can tell that they would
 * not take a path it does not take; otherwise it says so:
 * - a run whose fences do not hold gives no row, as alone;
 * - a run of an account with an endpoint for its terminal event gives `hooked` and writes nothing, as alone;
 * - a run a bundle could pay gives `alone` and writes nothing: its caller runs the single statement
 *   once the group has committed (picking among bundles run after run is the single statement's job);
 * - when an account's wallet does not cover every one of its runs' holds and charges in full, one after
 *   another (the single statements would refuse one, or record an unpaid charge), it raises
 *   (`wr_refuse`), and the group runs again statement by statement.
 * A run paid from the wallet takes its hold at settlement, as the single statement does: with the balance
 * covering both, the hold and its release cancel out, and the balance drops by the charges, one after
 * another, with the same four ledger rows per run in the same order.
 *
 * Returns one row per run whose fences held: `ord` (its place in the arrays, from 1), then the single
 * statement's columns (`account_id`, `hooked`, `last_sequence`, `settled`) and `alone`.
 */
export const START_FINISH_AND_SETTLE_MANY = statement(
  'start_finish_and_settle_many',
  `with i as (
  select x.ord, x.id, x.limit_steps, x.results::jsonb as results, x.add_timers::jsonb as add_timers, x.steps, x.extra::numeric as extra,
         x.status, x.outcome, x.reason, x.outputs::jsonb as outputs, x.charged,
         ${sqlArray('x.absent_results')} as absent_results, ${sqlArray('x.absent_timers')} as absent_timers,
         ${sqlArray('x.remove_timers')} as remove_timers, ${sqlArray('x.types')} as types, ${sqlArray('x.nodes')} as nodes,
         ${sqlArray('x.data', 'jsonb_array_elements')} as data
    from unnest($1::uuid[], $2::text[], $3::text[], $4::int[], $5::text[], $6::text[], $7::text[], $8::int[], $9::text[],
                $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[], $17::text[])
         with ordinality as x(id, absent_results, absent_timers, limit_steps, results, add_timers, remove_timers, steps, extra,
                              types, nodes, data, status, outcome, reason, outputs, charged, ord)),
f0 as (
  select i.*, r.account_id, r.workflow_id, r.version_id, r.displayed_price_usd, r.creator_price_usd,
         r.compute_usd + i.steps * r.step_usd + i.extra as compute,
         exists (select 1 from webhook_endpoints we where we.account_id = r.account_id and ${endpointTakes('we', `'run.' || i.status`)}) as hooked,
         exists (select 1 from bundles x where x.account_id = r.account_id and x.workflow_id = r.workflow_id
                                           and x.version_id = r.version_id and x.runs_left > 0) as bundled
    from i join runs r on r.id = i.id
   where ${runFences({ absentResults: 'i.absent_results', absentTimers: 'i.absent_timers', limitSteps: 'i.limit_steps' })}
   order by i.ord
     for update of r),
p as (
  select f0.*, x.billed, f0.displayed_price_usd as hold, coalesce(x.billed, 0) as take
    from f0, lateral (select wr_billed(wr_run_charge(f0.charged, f0.status, f0.creator_price_usd, f0.compute), null) as billed) x
   where not f0.hooked and not f0.bundled),
u as (
  update runs r set
    last_sequence = r.last_sequence + cardinality(p.types),
    updated_at = now(),
    status = p.status, outcome = p.outcome, reason = p.reason, outputs = coalesce(p.outputs, r.outputs),
    ${finishedRunSet({ results: 'p.results', addTimers: 'p.add_timers', removeTimers: 'p.remove_timers' })},
    steps_executed = r.steps_executed + p.steps,
    funding = 'wallet'
  from p
  where r.id = p.id
  returning p.ord, r.id, r.last_sequence, r.workflow_id, r.status),
e as (
  insert into run_event_batches (run_id, last_sequence, types, node_ids, data, ts)
  select u.id, u.last_sequence,
         case when cardinality(p.nodes) = cardinality(p.types) and cardinality(p.data) = cardinality(p.types) then p.types end,
         p.nodes, p.data, clock_timestamp()
    from u join p on p.ord = u.ord where cardinality(p.types) > 0
  returning run_id),
s as (delete from run_secrets where run_id in (select id from u)),
ws as (
  select p.ord, p.id as run_id, p.account_id, p.hold, p.take, p.id in (select run_id from e) as logged,
         coalesce(sum(p.take) over (partition by p.account_id order by p.ord rows between unbounded preceding and 1 preceding), 0) as before
    from p
   where p.hold <> 0 or p.take <> 0),
need as (select account_id, max(before + greatest(hold, take)) as need, sum(take) as taken from ws group by account_id),
w0 as (
  select wallets.account_id, wallets.balance_usd, need.taken
    from wallets join need on need.account_id = wallets.account_id
   where wallets.balance_usd >= need.need
   order by wallets.account_id
     for update of wallets),
w as (
  update wallets set balance_usd = w0.balance_usd - w0.taken, updated_at = now()
    from w0 where wallets.account_id = w0.account_id
  returning w0.account_id, w0.balance_usd as opening),
l as (
  insert into ledger_entries (account_id, run_id, kind, amount_usd, balance_after_usd, note, created_at)
  select ws.account_id, ws.run_id, k.kind, k.amount, k.after, k.note, now()
    from ws join w on w.account_id = ws.account_id ${ledgerRows({ balance: 'w.opening - ws.before', taken: 'ws.hold', hold: 'ws.hold', take: 'ws.take' })}
   where k.written
   order by ws.ord, k.n),
t as (
  insert into workflow_run_tallies (workflow_id, shard, runs)
  select u.workflow_id, pg_backend_pid() % 16, count(*) from u where u.status = 'completed' group by u.workflow_id order by u.workflow_id
  on conflict (workflow_id, shard) do update set runs = workflow_run_tallies.runs + excluded.runs)
select f0.ord, f0.account_id, f0.hooked, f0.bundled and not f0.hooked as alone, u.last_sequence,
       case when ws.ord is null then 0
            when ws.logged and (select count(*) from w) = (select count(*) from need) then 1
            else wr_refuse('the wallet balance does not cover the run price') end as settled
  from f0 left join u on u.ord = f0.ord left join ws on ws.ord = f0.ord
 order by f0.ord`,
  [WebhookEndpointSchema, BundleSchema, RunSchema, RunEventBatchSchema, RunSecretSchema, WalletSchema, LedgerEntrySchema, WorkflowRunTallySchema],
);
