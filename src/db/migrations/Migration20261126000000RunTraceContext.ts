import { Migration } from '@mikro-orm/migrations';

/**
 * The W3C trace context a run was started in (`{ traceparent, tracestate? }`, null when tracing was
 * off), so its execution continues that trace in whichever process runs it (docs/tracing.md).
 */
export class Migration20261126000000RunTraceContext extends Migration {
  override name = 'Migration20261126000000RunTraceContext';

  override up(): void {
    this.addSql(`alter table "runs" add column "trace_context" jsonb null`);
  }

  override down(): void {
    this.addSql(`alter table "runs" drop column "trace_context"`);
  }
}
