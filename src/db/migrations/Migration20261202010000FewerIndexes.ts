import { Migration } from '@mikro-orm/migrations';

/**
 * Indexes written on every run that no query needs as they were: `ledger_entries_run_id_index` and
 * `idempotency_records_expires_at_index` (nothing reads by them); `runs_status_queued_idx`, which covered
 * every run (two entries per run: its insert and its terminal write) for one reader, the Temporal
 * engine's sweep for runs whose workflow start was never marked, which gets an index of the few runs it
 * looks for instead (the queue's reads have indexes of their own). `runs_workflow_idx` becomes
 * `(workflow_id, created_at, id)`, the order the internal GraphQL search by workflow reads its runs in.
 */
export class Migration20261202010000FewerIndexes extends Migration {
  override name = 'Migration20261202010000FewerIndexes';

  override up(): void {
    this.addSql(`drop index "runs_workflow_idx"`);
    this.addSql(`create index "runs_workflow_created_idx" on "runs" ("workflow_id", "created_at", "id")`);
    this.addSql(`drop index "runs_status_queued_idx"`);
    this.addSql(`drop index "ledger_entries_run_id_index"`);
    this.addSql(`drop index "idempotency_records_expires_at_index"`);
    this.addSql(
      `create index "runs_temporal_unstarted_idx" on "runs" ("created_at", ` +
        `"id") where engine = 'temporal' and lease_owner is null and status in ('pending', 'running', 'suspended')`,
    );
  }

  override down(): void {
    this.addSql(`drop index "runs_temporal_unstarted_idx"`);
    this.addSql(`create index "idempotency_records_expires_at_index" on "idempotency_records" ("expires_at")`);
    this.addSql(`create index "ledger_entries_run_id_index" on "ledger_entries" ("run_id")`);
    this.addSql(`create index "runs_status_queued_idx" on "runs" ("status", "queued_at")`);
    this.addSql(`drop index "runs_workflow_created_idx"`);
    this.addSql(`create index "runs_workflow_idx" on "runs" ("workflow_id")`);
  }
}
