import type { Orm } from '../../src/db/orm.ts';

/**
 * `count` copies of run `runId` (new ids), with their metadata pairs in
 * run_labels: many queued runs of one account at once, for the bulk calls' pages and the bench, without
 * sending as many POST /runs.
 */
export async function cloneRun(orm: Orm, runId: string, count: number): Promise<void> {
  const em = orm.em.fork();
  await em.execute(
    `insert into runs select (jsonb_populate_record(null::runs,
       to_jsonb(r) || jsonb_build_object('id', gen_random_uuid()))).*
       from runs r cross join generate_series(1, ?) where r.id = ?`,
    [count, runId],
  );
  await em.execute(
    `insert into run_labels (account_id, key, value, created_at, run_id)
     select r.account_id, pair.key, pair.value, r.created_at, r.id from runs r cross join jsonb_each_text(r.metadata) pair
      where not exists (select 1 from run_labels l where l.run_id = r.id)`,
  );
}
