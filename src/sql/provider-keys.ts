import { statement } from '../db/statement.ts';
import { ProviderKeySchema } from '../db/entities/index.ts';

/** $1 account id, $2 provider: the account's sealed key for a provider (BYOK runs). */
export const ACCOUNT_PROVIDER_KEY = statement('account_provider_key', 'select ciphertext from provider_keys where account_id = $1 and provider = $2', [
  ProviderKeySchema,
]);
