import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import type { JsonValue } from '../../domain/graph/types.ts';
import { createdAt } from './columns.ts';

/** Service-wide settings kept in the database. The model as a whole: ./index.ts. */

/** Service-wide settings loaded from the catalog (pricing), shared by the API and worker processes. */
export const SettingSchema = defineEntity({
  name: 'Setting',
  tableName: 'settings',
  properties: {
    key: p.string().primary(),
    value: p.json<JsonValue>(),
    updatedAt: createdAt(),
  },
});
export type Setting = InferEntity<typeof SettingSchema>;
