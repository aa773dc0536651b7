import { Migration } from '@mikro-orm/migrations';

/** The whole initial data model (src/db/entities). Generated from the entities, then reviewed. */
export class Migration20261122000000Initial extends Migration {
  override name = 'Migration20261122000000Initial';

  override up(): void {
    this.addSql(
      `create table "accounts" ("id" uuid not null, "handle" varchar(255) not null, ` +
        `"restricted" boolean not null default false, "listings_paused" boolean not null default false, ` +
        `"max_concurrent_runs" int null, "connections" jsonb not null default '[]', ` +
        `"created_at" timestamptz not null default now(), primary key ("id"))`,
    );
    this.addSql(`alter table "accounts" add constraint "accounts_handle_unique" unique ("handle")`);
    this.addSql(
      `create table "api_keys" ("id" uuid not null, "account_id" uuid not null, "key_hash" varchar(64) not null, ` +
        `"prefix" varchar(16) not null, "scopes" jsonb not null, "rate_limit_per_minute" int not null default 60, ` +
        `"spend_cap_window" text null, "spend_cap_usd" numeric(18,6) null, "expires_at" timestamptz null, ` +
        `"revoked" boolean not null default false, "created_at" timestamptz not null default now(), primary key ("id"))`,
    );
    this.addSql(`alter table "api_keys" add constraint "api_keys_key_hash_unique" unique ("key_hash")`);
    this.addSql(`alter table "api_keys" add constraint "api_keys_spend_cap_window_check" check ("spend_cap_window" in ('daily', 'monthly', 'lifetime'))`);
    this.addSql(
      `create table "ledger_entries" ("id" bigserial primary key, "account_id" uuid not null, "run_id" uuid null, ` +
        `"kind" text not null, "amount_usd" numeric(18,6) not null, "balance_after_usd" numeric(18,6) not null, ` +
        `"note" text null, "created_at" timestamptz not null default now())`,
    );
    this.addSql(`create index "ledger_entries_account_id_id_index" on "ledger_entries" ("account_id", "id")`);
    this.addSql(`create index "ledger_entries_run_id_index" on "ledger_entries" ("run_id")`);
    this.addSql(
      `alter table "ledger_entries" add constraint "ledger_entries_kind_check" check ("kind" in ('credit', 'hold', ` +
        `'release', 'charge', 'bundle_charge', 'unpaid'))`,
    );
    this.addSql(
      `create table "provider_keys" ("id" uuid not null, "account_id" uuid not null, "provider" varchar(255) not null, ` +
        `"ciphertext" text not null, "created_at" timestamptz not null default now(), primary key ("id"))`,
    );
    this.addSql(`alter table "provider_keys" add constraint "provider_keys_account_id_provider_unique" unique ("account_id", "provider")`);
    this.addSql(
      `create table "settings" ("key" varchar(255) not null, "value" jsonb not null, ` +
        `"updated_at" timestamptz not null default now(), primary key ("key"))`,
    );
    this.addSql(
      `create table "wallets" ("account_id" uuid not null, "balance_usd" numeric(18,6) not null default '0', ` +
        `"held_usd" numeric(18,6) not null default '0', "updated_at" timestamptz not null default now(), ` +
        `primary key ("account_id"))`,
    );
    this.addSql(
      `create table "webhook_endpoints" ("id" uuid not null, "account_id" uuid not null, "url" text not null, ` +
        `"secret_ciphertext" text not null, "events" jsonb null, "created_at" timestamptz not null default now(), ` +
        `primary key ("id"))`,
    );
    this.addSql(`alter table "webhook_endpoints" add constraint "webhook_endpoints_account_id_url_unique" unique ("account_id", "url")`);
    this.addSql(
      `create table "workflows" ("id" uuid not null, "owner_id" uuid not null, "name" text not null, ` +
        `"description" text null, "service_code" varchar(255) null, "run_model" text not null, ` +
        `"price_usd" numeric(18,6) not null default '0', "listing" text not null, ` +
        `"unlock" boolean not null default false, "api_access" boolean not null default true, ` +
        `"credential_mode" text not null, "compute_limit_usd" numeric(18,6) null, "active_version_id" uuid null, ` +
        `"runs_count" int not null default 0, "created_at" timestamptz not null default now(), primary key ("id"))`,
    );
    this.addSql(`create index "workflows_owner_id_index" on "workflows" ("owner_id")`);
    this.addSql(`create index "workflows_name_id_index" on "workflows" ("name", "id")`);
    this.addSql(`alter table "workflows" add constraint "workflows_run_model_check" check ("run_model" in ('free', 'per_run'))`);
    this.addSql(`alter table "workflows" add constraint "workflows_listing_check" check ("listing" in ('public', 'unlisted', 'none'))`);
    this.addSql(`alter table "workflows" add constraint "workflows_credential_mode_check" check ("credential_mode" in ('service_hosted', 'byok'))`);
    this.addSql(
      `create table "workflow_versions" ("id" uuid not null, "workflow_id" uuid not null, ` +
        `"label" varchar(255) not null, "graph" jsonb not null, "graph_hash" varchar(64) not null, ` +
        `"created_at" timestamptz not null default now(), primary key ("id"))`,
    );
    this.addSql(`create index "workflow_versions_workflow_id_created_at_index" on "workflow_versions" ("workflow_id", "created_at")`);
    this.addSql(`alter table "workflow_versions" add constraint "workflow_versions_workflow_id_label_unique" unique ("workflow_id", "label")`);
    this.addSql(
      `create table "runs" ("id" uuid not null, "account_id" uuid not null, "api_key_id" uuid null, ` +
        `"workflow_id" uuid not null, "version_id" uuid not null, "status" text not null default 'pending', ` +
        `"phase" varchar(255) null, "reason" text null, "suspend_reason" varchar(255) null, ` +
        `"resume_at" timestamptz null, "outcome" text null, "billing_status" text not null default 'pending', ` +
        `"charge_usd" numeric(18,6) null, "cap_usd" numeric(18,6) not null default '0', "user_access" text not null, ` +
        `"displayed_price_usd" numeric(18,6) not null default '0', ` +
        `"creator_price_usd" numeric(18,6) not null default '0', "step_usd" numeric(18,6) not null default '0', ` +
        `"compute_limit_usd" numeric(18,6) not null, "compute_usd" numeric(18,6) not null default '0', ` +
        `"steps_executed" int not null default 0, "funding" varchar(255) null, "bundle_id" uuid null, ` +
        `"hold_usd" numeric(18,6) not null default '0', "credential_mode" text not null, "inputs" jsonb not null, ` +
        `"progress" jsonb not null, "outputs" jsonb not null default '[]', ` +
        `"cancel_requested" boolean not null default false, "last_sequence" int not null default 0, ` +
        `"engine" varchar(255) not null default 'embedded', "lease_owner" varchar(255) null, ` +
        `"lease_until" timestamptz null, "created_at" timestamptz not null default now(), ` +
        `"queued_at" timestamptz not null default now(), "started_at" timestamptz null, "completed_at" timestamptz null, ` +
        `"updated_at" timestamptz not null default now(), primary key ("id"))`,
    );
    this.addSql(`create index "runs_account_created_idx" on "runs" ("account_id", "created_at", "id")`);
    this.addSql(`create index "runs_status_queued_idx" on "runs" ("status", "queued_at")`);
    this.addSql(`create index "runs_api_key_created_idx" on "runs" ("api_key_id", "created_at")`);
    this.addSql(`create index "runs_workflow_idx" on "runs" ("workflow_id")`);
    this.addSql(
      `alter table "runs" add constraint "runs_status_check" check ("status" in ('pending', 'running', 'suspended', ` + `'completed', 'failed', 'cancelled'))`,
    );
    this.addSql(`alter table "runs" add constraint "runs_outcome_check" check ("outcome" in ('completed', 'completed_with_issues'))`);
    this.addSql(`alter table "runs" add constraint "runs_billing_status_check" check ("billing_status" in ('pending', 'settled', 'not_charged'))`);
    this.addSql(`alter table "runs" add constraint "runs_user_access_check" check ("user_access" in ('owned', 'purchased', 'wallet', 'purchase_required'))`);
    this.addSql(`alter table "runs" add constraint "runs_credential_mode_check" check ("credential_mode" in ('service_hosted', 'byok'))`);
    this.addSql(
      `create table "webhook_deliveries" ("id" varchar(255) not null, "endpoint_id" uuid not null, ` +
        `"run_id" uuid not null, "event_type" varchar(255) not null, "payload" text not null, ` +
        `"status" text not null default 'pending', "attempts" int not null default 0, ` +
        `"next_attempt_at" timestamptz not null, "last_status_code" int null, "last_error" text null, ` +
        `"created_at" timestamptz not null default now(), "delivered_at" timestamptz null, primary key ("id"))`,
    );
    this.addSql(`create index "webhook_deliveries_due_idx" on "webhook_deliveries" ("status", "next_attempt_at")`);
    this.addSql(`alter table "webhook_deliveries" add constraint "webhook_deliveries_status_check" check ("status" in ('pending', 'delivered', 'failed'))`);
    this.addSql(
      `create table "run_secrets" ("id" uuid not null, "run_id" uuid not null, "kind" text not null, ` +
        `"name" varchar(255) not null, "ciphertext" text not null, "created_at" timestamptz not null default now(), ` +
        `primary key ("id"))`,
    );
    this.addSql(`alter table "run_secrets" add constraint "run_secrets_run_id_kind_name_unique" unique ("run_id", "kind", "name")`);
    this.addSql(`alter table "run_secrets" add constraint "run_secrets_kind_check" check ("kind" in ('password_input', 'provider_credential'))`);
    this.addSql(
      `create table "run_events" ("id" bigserial primary key, "run_id" uuid not null, "sequence" int not null, ` +
        `"type" varchar(255) not null, "node_id" varchar(255) null, "data" jsonb not null, ` +
        `"ts" timestamptz not null default now())`,
    );
    this.addSql(`alter table "run_events" add constraint "run_events_run_sequence_unique" unique ("run_id", "sequence")`);
    this.addSql(
      `create table "idempotency_records" ("id" uuid not null, "account_id" uuid not null, ` +
        `"key" varchar(255) not null, "fingerprint" varchar(64) not null, "run_id" uuid not null, ` +
        `"created_at" timestamptz not null default now(), "expires_at" timestamptz not null, primary key ("id"))`,
    );
    this.addSql(`create index "idempotency_records_expires_at_index" on "idempotency_records" ("expires_at")`);
    this.addSql(`alter table "idempotency_records" add constraint "idempotency_account_key_unique" unique ("account_id", "key")`);
    this.addSql(
      `create table "purchases" ("id" uuid not null, "account_id" uuid not null, "workflow_id" uuid not null, ` +
        `"version_id" uuid not null, "created_at" timestamptz not null default now(), ` +
        `"updated_at" timestamptz not null default now(), primary key ("id"))`,
    );
    this.addSql(`alter table "purchases" add constraint "purchases_account_id_workflow_id_unique" unique ("account_id", "workflow_id")`);
    this.addSql(
      `create table "bundles" ("id" uuid not null, "account_id" uuid not null, "workflow_id" uuid not null, ` +
        `"version_id" uuid not null, "runs_total" int not null, "runs_left" int not null, ` +
        `"usd_per_run" numeric(18,6) not null, "created_at" timestamptz not null default now(), primary key ("id"))`,
    );
    this.addSql(`alter table "bundles" add constraint "bundles_account_id_workflow_id_version_id_unique" unique ("account_id", "workflow_id", "version_id")`);
    this.addSql(
      `alter table "api_keys" add constraint "api_keys_account_id_foreign" foreign key ("account_id") references ` + `"accounts" ("id") on delete cascade`,
    );
    this.addSql(
      `alter table "ledger_entries" add constraint "ledger_entries_account_id_foreign" foreign key ("account_id") ` +
        `references "accounts" ("id") on delete cascade`,
    );
    this.addSql(
      `alter table "provider_keys" add constraint "provider_keys_account_id_foreign" foreign key ("account_id") ` +
        `references "accounts" ("id") on delete cascade`,
    );
    this.addSql(
      `alter table "wallets" add constraint "wallets_account_id_foreign" foreign key ("account_id") references ` +
        `"accounts" ("id") on update cascade on delete cascade`,
    );
    this.addSql(
      `alter table "webhook_endpoints" add constraint "webhook_endpoints_account_id_foreign" foreign key ` +
        `("account_id") references "accounts" ("id") on delete cascade`,
    );
    this.addSql(`alter table "workflows" add constraint "workflows_owner_id_foreign" foreign key ("owner_id") references "accounts" ("id")`);
    this.addSql(
      `alter table "workflow_versions" add constraint "workflow_versions_workflow_id_foreign" foreign key ` +
        `("workflow_id") references "workflows" ("id") on delete cascade`,
    );
    this.addSql(`alter table "runs" add constraint "runs_account_id_foreign" foreign key ("account_id") references "accounts" ("id")`);
    this.addSql(`alter table "runs" add constraint "runs_workflow_id_foreign" foreign key ("workflow_id") references "workflows" ("id")`);
    this.addSql(`alter table "runs" add constraint "runs_version_id_foreign" foreign key ("version_id") references "workflow_versions" ("id")`);
    this.addSql(
      `alter table "webhook_deliveries" add constraint "webhook_deliveries_endpoint_id_foreign" foreign key ` +
        `("endpoint_id") references "webhook_endpoints" ("id") on delete cascade`,
    );
    this.addSql(
      `alter table "webhook_deliveries" add constraint "webhook_deliveries_run_id_foreign" foreign key ("run_id") ` +
        `references "runs" ("id") on delete cascade`,
    );
    this.addSql(`alter table "run_secrets" add constraint "run_secrets_run_id_foreign" foreign key ("run_id") references "runs" ("id") on delete cascade`);
    this.addSql(`alter table "run_events" add constraint "run_events_run_id_foreign" foreign key ("run_id") references "runs" ("id") on delete cascade`);
    this.addSql(
      `alter table "idempotency_records" add constraint "idempotency_records_account_id_foreign" foreign key ` +
        `("account_id") references "accounts" ("id") on delete cascade`,
    );
    this.addSql(
      `alter table "idempotency_records" add constraint "idempotency_records_run_id_foreign" foreign key ("run_id") ` +
        `references "runs" ("id") on delete cascade`,
    );
    this.addSql(
      `alter table "purchases" add constraint "purchases_account_id_foreign" foreign key ("account_id") references ` + `"accounts" ("id") on delete cascade`,
    );
    this.addSql(
      `alter table "purchases" add constraint "purchases_workflow_id_foreign" foreign key ("workflow_id") references ` + `"workflows" ("id") on delete cascade`,
    );
    this.addSql(`alter table "purchases" add constraint "purchases_version_id_foreign" foreign key ("version_id") references "workflow_versions" ("id")`);
    this.addSql(`alter table "bundles" add constraint "bundles_account_id_foreign" foreign key ("account_id") references "accounts" ("id") on delete cascade`);
    this.addSql(
      `alter table "bundles" add constraint "bundles_workflow_id_foreign" foreign key ("workflow_id") references ` + `"workflows" ("id") on delete cascade`,
    );
    this.addSql(`alter table "bundles" add constraint "bundles_version_id_foreign" foreign key ("version_id") references "workflow_versions" ("id")`);
  }
}
