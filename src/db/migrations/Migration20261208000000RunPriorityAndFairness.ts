import { Migration } from '@mikro-orm/migrations';
import { ADMIT_QUEUED_RETURNS } from './Migration20261204000000AdmissionFunctions.ts';
// The round before this one, whose admitting update finds the picked runs by primary key; kept as it is here.
import { ADMIT_QUEUED_BODY } from './Migration20261208000000AdmitByPrimaryKey.ts';

/**
 * Priority and concurrency keys (docs/design/flow-control.md). A run gets its priority class (`priority`:
 * 0 high, 1 normal, 2 low), its caller's concurrency key and that key's bound, and its pass
 * (`fair_pass`): the turn of its key it belongs to, counted on its class's virtual clock. The queue's
 * order becomes (effective class, pass, acceptance time, id); the admission round and the place read it
 * in that order, so a place is still the number of queued runs admitted before the run, plus one.
 * The API key says whether it may ask for high priority and bounds the runs in flight per concurrency key.
 * New columns have constant defaults or none: no row is rewritten.
 */
export class Migration20261208000000RunPriorityAndFairness extends Migration {
  override name = 'Migration20261208000000RunPriorityAndFairness';

  override up(): void {
    this.addSql(
      `alter table "runs" add column "priority" smallint not null default 1, add column "concurrency_key" varchar(255) null, ` +
        `add column "concurrency_limit" int null, add column "fair_pass" bigint not null default '0'`,
    );
    this.addSql(`alter table "api_keys" add column "high_priority" boolean not null default false, add column "max_concurrent_per_concurrency_key" int null`);
    this.addSql(`create index "runs_queue_fair_idx" on "runs" ("priority", "fair_pass", "queued_at", "id") where status = 'pending' and phase = 'queued'`);
    this.addSql(
      `create index "runs_queue_key_idx" on "runs" ("account_id", "concurrency_key", "priority", "fair_pass") ` +
        `where status = 'pending' and phase = 'queued' and concurrency_key is not null`,
    );
    this.addSql(
      `create index "runs_concurrency_key_created_idx" on "runs" ("account_id", "concurrency_key", "created_at", "id") where concurrency_key is not null`,
    );
    this.addSql(`create or replace function "wr_admit_queued"(${ADMIT_QUEUED_PARAMS}) returns ${ADMIT_QUEUED_RETURNS}
  volatile language plpgsql as $$ ${ADMIT_FAIR_BODY} $$`);
    this.addSql(`create or replace function "wr_fair_place"(${FAIR_PLACE_PARAMS}) returns bigint
  stable language plpgsql as $$ ${FAIR_PLACE_BODY} $$`);
  }

  override down(): void {
    this.addSql(`create or replace function "wr_admit_queued"(${ADMIT_QUEUED_PARAMS}) returns ${ADMIT_QUEUED_RETURNS}
  volatile language plpgsql as $$ ${ADMIT_QUEUED_BODY} $$`);
    this.addSql('drop function if exists wr_fair_place(smallint, bigint, timestamptz, uuid)');
    this.addSql(`drop index "runs_concurrency_key_created_idx"`);
    this.addSql(`drop index "runs_queue_key_idx"`);
    this.addSql(`drop index "runs_queue_fair_idx"`);
    this.addSql(`alter table "api_keys" drop column "high_priority", drop column "max_concurrent_per_concurrency_key"`);
    this.addSql(`alter table "runs" drop column "priority", drop column "concurrency_key", drop column "concurrency_limit", drop column "fair_pass"`);
  }
}

const ADMIT_QUEUED_PARAMS = `"round_capacity" int, "round_engine" text, "queue_window" int, "lease_holder" text, "lease_seconds" float8`;

/** How long a low-priority run waits before it counts as normal (docs/design/flow-control.md#aging). */
export const LOW_PRIORITY_AGE_SECONDS = 300;

/**
 * The first `queue_window` queued runs of `round_engine` (any when null) of one class in the queue's
 * order, as `effective_class` `cls` with `pass` its pass in that class: a range of runs_queue_fair_idx,
 * but for aged low runs, which are few and ordered by acceptance alone.
 */
const lineHead = (cls: number, pass: string, where: string, order: string) => `(select queued.id, queued.account_id, queued.concurrency_key,
       queued.concurrency_limit, ${cls}::smallint as effective_class, ${pass} as fair_pass, queued.queued_at from runs queued
     where queued.status = 'pending' and queued.phase = 'queued' and ${where}
       and (round_engine is null or queued.engine = round_engine)
     order by ${order} limit queue_window)`;
const AGED = `queued.queued_at < now() - interval '${LOW_PRIORITY_AGE_SECONDS} seconds'`;
const IN_PASS_ORDER = 'queued.priority, queued.fair_pass, queued.queued_at, queued.id';

/**
 * wr_admit_queued, the admission round of Migration20261204000000AdmissionFunctions (its lock, its plan
 * settings, its lease and commit) in the queue's fair order: higher effective class first, then the
 * lower pass, then the earlier acceptance; a low run aged into the normal class has pass 0 (ahead of
 * every normal run, oldest first). A run is passed over while its account is at its
 * max_concurrent_runs (as before) or its concurrency key at its bound: the key's runs in flight plus its
 * earlier queued runs of the round reach the run's concurrency_limit. The lock and settings before the
 * query, and the update of the picked runs after it, are the earlier round's text.
 */
export const ADMIT_FAIR_BODY = `${ADMIT_QUEUED_BODY.slice(0, ADMIT_QUEUED_BODY.indexOf('  with in_flight as ('))}  with in_flight as (
    select busy.account_id, busy.concurrency_key, count(*)::int as runs_in_flight from runs busy
     where (busy.status in ('running', 'suspended') or (busy.status = 'pending' and busy.phase in ('starting', 'preparing')))
     group by busy.account_id, busy.concurrency_key),
  account_in_flight as (
    select busy.account_id, sum(busy.runs_in_flight)::int as runs_in_flight from in_flight busy group by busy.account_id),
  line_head as (
    select head.* from (
      ${lineHead(0, 'queued.fair_pass', 'queued.priority = 0', IN_PASS_ORDER)}
      union all ${lineHead(1, '0::bigint', `queued.priority = 2 and ${AGED}`, 'queued.queued_at, queued.id')}
      union all ${lineHead(1, 'queued.fair_pass', 'queued.priority = 1', IN_PASS_ORDER)}
      union all ${lineHead(2, 'queued.fair_pass', `queued.priority = 2 and not (${AGED})`, IN_PASS_ORDER)}) head
     order by head.effective_class, head.fair_pass, head.queued_at, head.id limit queue_window),
  ranked as (
    select head.id, head.effective_class, head.fair_pass, head.queued_at, account.max_concurrent_runs as account_limit,
           coalesce(account_busy.runs_in_flight, 0) as account_in_flight,
           row_number() over (partition by head.account_id order by head.effective_class, head.fair_pass, head.queued_at, head.id) as place_in_account,
           head.concurrency_key, head.concurrency_limit, coalesce(key_busy.runs_in_flight, 0) as key_in_flight,
           row_number() over (partition by head.account_id, head.concurrency_key
                              order by head.effective_class, head.fair_pass, head.queued_at, head.id) as place_in_key
      from line_head head join accounts account on account.id = head.account_id
      left join account_in_flight account_busy on account_busy.account_id = head.account_id
      left join in_flight key_busy on key_busy.account_id = head.account_id and key_busy.concurrency_key = head.concurrency_key),
  picked as (
    select ranked.id from ranked
     where (ranked.account_limit is null or ranked.account_in_flight + ranked.place_in_account <= ranked.account_limit)
       and (ranked.concurrency_key is null or ranked.concurrency_limit is null
            or ranked.key_in_flight + ranked.place_in_key <= ranked.concurrency_limit)
     order by ranked.effective_class, ranked.fair_pass, ranked.queued_at, ranked.id
     limit case when exists (select 1 from line_head)
                then greatest(round_capacity - (select coalesce(sum(in_flight.runs_in_flight), 0)::int from in_flight), 0) else 0 end),
${ADMIT_QUEUED_BODY.slice(ADMIT_QUEUED_BODY.indexOf('  admitted as ('))}`;

const FAIR_PLACE_PARAMS = `"run_priority" smallint, "run_pass" bigint, "run_queued_at" timestamptz, "run_id" uuid`;

/** Queued runs matching `where`: a count over runs_queue_fair_idx. */
const countOf = (where: string) => `(select count(*) from runs queued
      where queued.status = 'pending' and queued.phase = 'queued' and ${where})`;
const BEFORE = '(queued.fair_pass, queued.queued_at, queued.id) < (run_pass, run_queued_at, run_id)';
const AGED_BEFORE_RUN = '(queued.queued_at, queued.id) < (run_queued_at, run_id)';
/** An aged low run ahead of a normal one: pass 0 against the run's (every normal run accepted since the upgrade has a pass from 1). */
const AGED_BEFORE_NORMAL = '(0::bigint, queued.queued_at, queued.id) < (run_pass, run_queued_at, run_id)';

/**
 * The counts wr_fair_place adds up, each a range of runs_queue_fair_idx (test/db/queue-place-plan.test.ts
 * holds each to an index-only read): the runs ahead of a `high` run; every queued high run; the aged low
 * runs ahead of an aged low run, and ahead of a normal run; the normal runs ahead of a normal run; every
 * run above the low class; every aged low run; the runs ahead of a low run that has not aged.
 */
export const FAIR_PLACE_COUNTS = {
  highBefore: countOf(`queued.priority = 0 and ${BEFORE}`),
  high: countOf('queued.priority = 0'),
  agedBeforeAged: countOf(`queued.priority = 2 and queued.queued_at < aged_before and ${AGED_BEFORE_RUN}`),
  agedBeforeNormal: countOf(`queued.priority = 2 and queued.queued_at < aged_before and ${AGED_BEFORE_NORMAL}`),
  normalBefore: countOf(`queued.priority = 1 and ${BEFORE}`),
  aboveLow: countOf('queued.priority < 2'),
  aged: countOf('queued.priority = 2 and queued.queued_at < aged_before'),
  lowBefore: countOf(`queued.priority = 2 and queued.queued_at >= aged_before and ${BEFORE}`),
};
const C = FAIR_PLACE_COUNTS;

/**
 * wr_fair_place(run_priority, run_pass, run_queued_at, run_id): the exact place (1 = next) of a queued
 * run: the queued runs an admission round takes before it (wr_admit_queued's order), plus one. Those
 * are the runs of a higher effective class, and those of its own class with a lower (pass, queued_at,
 * id); a low run queued longer than LOW_PRIORITY_AGE_SECONDS is of the normal class with pass 0. STABLE,
 * so the place and the status beside it come from the snapshot of the statement that reads them. Each
 * count is a range of runs_queue_fair_idx.
 */
export const FAIR_PLACE_BODY = `declare
  aged_before timestamptz := now() - interval '${LOW_PRIORITY_AGE_SECONDS} seconds';
begin
  if run_priority = 0 then
    return 1 + ${C.highBefore};
  end if;
  if run_priority = 2 and run_queued_at < aged_before then
    return 1 + ${C.high} + ${C.agedBeforeAged};
  end if;
  if run_priority = 1 then
    return 1 + ${C.high} + ${C.agedBeforeNormal}
      + ${C.normalBefore};
  end if;
  return 1 + ${C.aboveLow} + ${C.aged}
    + ${C.lowBefore};
end`;
