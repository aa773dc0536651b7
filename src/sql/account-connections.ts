import { statement } from '../db/statement.ts';
import { AccountSchema } from '../db/entities/index.ts';

/** $1 account id: the integrations the account has connected (a JSON array of provider ids). */
export const ACCOUNT_CONNECTIONS = statement('account_connections', 'select connections from accounts where id = $1', [AccountSchema]);
