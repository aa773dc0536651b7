import { statement } from '../db/statement.ts';
import { RunSecretSchema } from '../db/entities/index.ts';

/**
 * A run's secrets (`run_secrets`): its sealed password inputs (written at acceptance,
 * src/sql/accept-runs.ts) and provider credentials supplied later; finish_runs deletes them.
 */

/** $1 run id: every secret of the run, sealed (what a step executes with). */
export const READ_RUN_SECRETS = statement('read_run_secrets', 'select kind, name, ciphertext from run_secrets where run_id = $1', [RunSecretSchema]);

/** $1 run id: the providers with supplied credentials. */
export const SUPPLIED_CREDENTIALS = statement('supplied_credentials', `select name from run_secrets where run_id = $1 and kind = 'provider_credential'`, [
  RunSecretSchema,
]);

/** $1 run id, $2 provider: one row when a credential for it was supplied. */
export const SUPPLIED_CREDENTIAL = statement(
  'supplied_credential',
  `select name from run_secrets where run_id = $1 and kind = 'provider_credential' and name = $2`,
  [RunSecretSchema],
);

/** $1 run id, $2 secret ids, $3 providers, $4 sealed keys: supplied credentials, replacing earlier ones per provider. */
export const STORE_CREDENTIALS = statement(
  'store_credentials',
  `insert into run_secrets (id, run_id, kind, name, ciphertext, created_at)
   select c.id, $1, 'provider_credential', c.name, c.ciphertext, now() from unnest($2::uuid[], $3::text[], $4::text[]) as c(id, name, ciphertext)
   on conflict (run_id, kind, name) do update set ciphertext = excluded.ciphertext, created_at = excluded.created_at`,
  [RunSecretSchema],
);
