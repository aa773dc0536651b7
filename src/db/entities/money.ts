import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { createdAt, money } from './columns.ts';
import { AccountSchema } from './accounts.ts';
import { WorkflowSchema, WorkflowVersionSchema } from './catalog.ts';

/** Wallets, their ledger, purchases and bundles (docs/design/money.md). The model as a whole: ./index.ts. */

/** Current balance of an account; every change is mirrored by a ledger row in the same transaction. */
export const WalletSchema = defineEntity({
  name: 'Wallet',
  tableName: 'wallets',
  properties: {
    accountId: p.manyToOne(AccountSchema).mapToPk().fieldName('account_id').primary().deleteRule('cascade'),
    balanceUsd: money().default('0'),
    heldUsd: money().default('0'),
    updatedAt: createdAt(),
  },
});
export type Wallet = InferEntity<typeof WalletSchema>;

export const LEDGER_KINDS = ['credit', 'hold', 'release', 'charge', 'bundle_charge', 'unpaid'] as const;
export type LedgerKind = (typeof LEDGER_KINDS)[number];

/**
 * Append-only wallet history. `amountUsd` is signed as it moves the available balance. Every row is
 * written from the wallet row it mirrors, in the statement that changes that wallet, and accounts are
 * never deleted: no foreign key to accounts (Migration20261202020000LedgerWithoutAccountKey).
 */
export const LedgerEntrySchema = defineEntity({
  name: 'LedgerEntry',
  tableName: 'ledger_entries',
  properties: {
    id: p.bigint('number').primary().autoincrement(),
    accountId: p.manyToOne(AccountSchema).mapToPk().fieldName('account_id').createForeignKeyConstraint(false),
    runId: p.uuid().nullable(),
    kind: p.enum(LEDGER_KINDS),
    amountUsd: money(),
    balanceAfterUsd: money(),
    note: p.text().nullable(),
    createdAt: createdAt(),
  },
  indexes: [{ properties: ['accountId', 'id'] }],
});
export type LedgerEntry = InferEntity<typeof LedgerEntrySchema>;

/** A purchase pins the buyer to one version until they accept an update. */
export const PurchaseSchema = defineEntity({
  name: 'Purchase',
  tableName: 'purchases',
  properties: {
    id: p.uuid().primary(),
    accountId: p.manyToOne(AccountSchema).mapToPk().fieldName('account_id').deleteRule('cascade'),
    workflowId: p.manyToOne(WorkflowSchema).mapToPk().fieldName('workflow_id').deleteRule('cascade'),
    versionId: p.manyToOne(WorkflowVersionSchema).mapToPk().fieldName('version_id'),
    createdAt: createdAt(),
    updatedAt: createdAt(),
  },
  uniques: [{ properties: ['accountId', 'workflowId'] }],
});
export type Purchase = InferEntity<typeof PurchaseSchema>;

export const BundleSchema = defineEntity({
  name: 'Bundle',
  tableName: 'bundles',
  properties: {
    id: p.uuid().primary(),
    accountId: p.manyToOne(AccountSchema).mapToPk().fieldName('account_id').deleteRule('cascade'),
    workflowId: p.manyToOne(WorkflowSchema).mapToPk().fieldName('workflow_id').deleteRule('cascade'),
    versionId: p.manyToOne(WorkflowVersionSchema).mapToPk().fieldName('version_id'),
    runsTotal: p.integer(),
    runsLeft: p.integer(),
    usdPerRun: money(),
    createdAt: createdAt(),
  },
  uniques: [{ properties: ['accountId', 'workflowId', 'versionId'] }],
});
export type Bundle = InferEntity<typeof BundleSchema>;
