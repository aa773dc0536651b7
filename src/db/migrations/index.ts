import type { MigrationObject } from '@mikro-orm/core';
import { Migration20261122000000Initial } from './Migration20261122000000Initial.ts';
import { Migration20261123000000QueueIndexes } from './Migration20261123000000QueueIndexes.ts';
import { Migration20261124000000WorkflowRunTallies } from './Migration20261124000000WorkflowRunTallies.ts';
import { Migration20261124120000SettlementRefusal } from './Migration20261124120000SettlementRefusal.ts';
import { Migration20261125000000ApiKeyRateWindows } from './Migration20261125000000ApiKeyRateWindows.ts';
import { Migration20261125120000SpendCapReservation } from './Migration20261125120000SpendCapReservation.ts';
import { Migration20261126000000RunTraceContext } from './Migration20261126000000RunTraceContext.ts';
import { Migration20261126000000QueueLine } from './Migration20261126000000QueueLine.ts';
import { Migration20261126010000StreamSlots } from './Migration20261126010000StreamSlots.ts';
import { Migration20261127000000RateWindowBuckets } from './Migration20261127000000RateWindowBuckets.ts';
import { Migration20261128000000UnloggedRateWindows } from './Migration20261128000000UnloggedRateWindows.ts';
import { Migration20261128010000RunEventsKey } from './Migration20261128010000RunEventsKey.ts';
import { Migration20261129000000InFlightIndex } from './Migration20261129000000InFlightIndex.ts';
import { Migration20261130000000RunEventsWithoutForeignKey } from './Migration20261130000000RunEventsWithoutForeignKey.ts';
import { Migration20261201000000RateWindowTotal } from './Migration20261201000000RateWindowTotal.ts';
import { Migration20261202000000RunEventBatches } from './Migration20261202000000RunEventBatches.ts';
import { Migration20261202010000FewerIndexes } from './Migration20261202010000FewerIndexes.ts';
import { Migration20261202020000LedgerWithoutAccountKey } from './Migration20261202020000LedgerWithoutAccountKey.ts';
import { Migration20261202030000RunDomains } from './Migration20261202030000RunDomains.ts';
import { Migration20261203000000MoneyRules } from './Migration20261203000000MoneyRules.ts';
import { Migration20261204380000AcceptRunsInBatches } from './Migration20261204380000AcceptRunsInBatches.ts';

/** Listed in code (not globbed from disk) so migrations run the same under tsx, bundles and tests. */
export const migrations: MigrationObject[] = [
  { name: 'Migration20261122000000Initial', class: Migration20261122000000Initial },
  { name: 'Migration20261123000000QueueIndexes', class: Migration20261123000000QueueIndexes },
  { name: 'Migration20261124000000WorkflowRunTallies', class: Migration20261124000000WorkflowRunTallies },
  { name: 'Migration20261124120000SettlementRefusal', class: Migration20261124120000SettlementRefusal },
  { name: 'Migration20261125000000ApiKeyRateWindows', class: Migration20261125000000ApiKeyRateWindows },
  { name: 'Migration20261125120000SpendCapReservation', class: Migration20261125120000SpendCapReservation },
  { name: 'Migration20261126000000RunTraceContext', class: Migration20261126000000RunTraceContext },
  { name: 'Migration20261126000000QueueLine', class: Migration20261126000000QueueLine },
  { name: 'Migration20261126010000StreamSlots', class: Migration20261126010000StreamSlots },
  { name: 'Migration20261127000000RateWindowBuckets', class: Migration20261127000000RateWindowBuckets },
  { name: 'Migration20261128000000UnloggedRateWindows', class: Migration20261128000000UnloggedRateWindows },
  { name: 'Migration20261128010000RunEventsKey', class: Migration20261128010000RunEventsKey },
  { name: 'Migration20261129000000InFlightIndex', class: Migration20261129000000InFlightIndex },
  { name: 'Migration20261130000000RunEventsWithoutForeignKey', class: Migration20261130000000RunEventsWithoutForeignKey },
  { name: 'Migration20261201000000RateWindowTotal', class: Migration20261201000000RateWindowTotal },
  { name: 'Migration20261202000000RunEventBatches', class: Migration20261202000000RunEventBatches },
  { name: 'Migration20261202010000FewerIndexes', class: Migration20261202010000FewerIndexes },
  { name: 'Migration20261202020000LedgerWithoutAccountKey', class: Migration20261202020000LedgerWithoutAccountKey },
  { name: 'Migration20261202030000RunDomains', class: Migration20261202030000RunDomains },
  { name: 'Migration20261203000000MoneyRules', class: Migration20261203000000MoneyRules },
  { name: 'Migration20261204380000AcceptRunsInBatches', class: Migration20261204380000AcceptRunsInBatches },
];
