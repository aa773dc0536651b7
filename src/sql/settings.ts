import { statement } from '../db/statement.ts';
import { SettingSchema } from '../db/entities/index.ts';

/** Service-wide settings (table `settings`: a JSON value per key), such as the catalog's pricing. */

/** $1 key. */
export const FIND_SETTING = statement('find_setting', `select value from settings where key = $1`, [SettingSchema]);

/** $1 key, $2 value (JSON text). */
export const SAVE_SETTING = statement(
  'save_setting',
  `insert into settings (key, value, updated_at) values ($1, $2::jsonb, now())
     on conflict (key) do update set value = excluded.value, updated_at = now()`,
  [SettingSchema],
);
