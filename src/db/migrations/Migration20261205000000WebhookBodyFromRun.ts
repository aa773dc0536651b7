import { Migration } from '@mikro-orm/migrations';

/**
 * A webhook's body is no longer stored: the sender renders it from the run when it claims the delivery
 * (docs/design/webhooks.md#events-and-body), so `webhook_deliveries` records only the run, the event and
 * its time. A delivery still pending from before this migration is sent with the body rendered the new way.
 */
export class Migration20261205000000WebhookBodyFromRun extends Migration {
  override name = 'Migration20261205000000WebhookBodyFromRun';

  override up(): void {
    this.addSql(`alter table "webhook_deliveries" drop column "payload"`);
  }
}
