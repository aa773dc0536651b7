import { Migration } from '@mikro-orm/migrations';

/**
 * The event log is stored as one row per write (`run_event_batches`: the events one statement appended,
 * as parallel arrays, keyed by the run and the batch's last sequence) instead of one row per event: a
 * run computed in memory appends a dozen events in one write, which cost a dozen heap tuples, index
 * entries and WAL records. `run_events` stays, as a view with the old rows, for ad-hoc reads
 * (docs/round-trips.md#the-event-log-in-batches), and takes the inserts of processes of the previous
 * version during a rolling upgrade (a trigger makes each row a batch of one). Existing events move over
 * one batch per event, so each keeps its own `ts`.
 */
export class Migration20261202000000RunEventBatches extends Migration {
  override name = 'Migration20261202000000RunEventBatches';

  override up(): void {
    this.addSql(`create table "run_event_batches" (
      "run_id" uuid not null,
      "last_sequence" int not null,
      "types" text[] not null,
      "node_ids" text[] not null,
      "data" jsonb[] not null,
      "ts" timestamptz not null default now(),
      constraint "run_event_batches_pkey" primary key ("run_id", "last_sequence"))`);
    this.addSql(`insert into "run_event_batches" ("run_id", "last_sequence", "types", "node_ids", "data", "ts")
      select "run_id", "sequence", array["type"]::text[], array["node_id"]::text[], array["data"], "ts" from "run_events"`);
    this.addSql(`drop table "run_events"`);
    this.addSql(`create view "run_events" as ${RUN_EVENTS_VIEW}`);
    // A process of the previous version, still running during a rolling upgrade, inserts events into
    // run_events one row each: each becomes a batch of one.
    this.addSql(`create function "run_events_insert"() returns trigger language plpgsql as $$
begin
  insert into run_event_batches (run_id, last_sequence, types, node_ids, data, ts)
  values (new.run_id, new.sequence, array[new.type]::text[], array[new.node_id]::text[], array[new.data], coalesce(new.ts, now()));
  return new;
end $$`);
    this.addSql(`create trigger "run_events_insert" instead of insert on "run_events" for each row execute function "run_events_insert"()`);
  }

  override down(): void {
    this.addSql(`drop view "run_events"`);
    this.addSql(`drop function "run_events_insert"()`);
    this.addSql(
      `create table "run_events" ("run_id" uuid not null, "sequence" int not null, "type" varchar(255) not null, ` +
        `"node_id" varchar(255) null, "data" jsonb not null, "ts" timestamptz not null default now(), ` +
        `constraint "run_events_pkey" primary key ("run_id", "sequence"))`,
    );
    this.addSql(`insert into "run_events" ("run_id", "sequence", "type", "node_id", "data", "ts") ${RUN_EVENTS_VIEW}`);
    this.addSql(`drop table "run_event_batches"`);
  }
}

/** One row per event, as the table `run_events` had them (the entity RunEventSchema's expression). */
const RUN_EVENTS_VIEW = `select b.run_id, (b.last_sequence - cardinality(b.types) + e.ord)::int as sequence, e.type, e.node_id, e.data, b.ts
  from run_event_batches b cross join lateral unnest(b.types, b.node_ids, b.data) with ordinality as e(type, node_id, data, ord)`;
