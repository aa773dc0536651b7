import pg from 'pg';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { isStatementError } from '../../src/db/server-errors.ts';

/**
 * Which errors from a Postgres server leave its connection usable (src/db/server-errors.ts), told by
 * their severity in English and by their SQLSTATE when the server writes its messages in another
 * language. The errors are the server's own; a translation is stood in for by renaming the severity
 * (the machine has no other locale for the server to use).
 */

const url = process.env.DATABASE_URL;
const t = suite('server errors');

/** The error `fn` rejects with. */
async function caught(fn: () => Promise<unknown>): Promise<Record<string, unknown>> {
  try {
    await fn();
  } catch (error) {
    return error as Record<string, unknown>;
  }
  throw new Error('expected an error');
}

const translated = (error: Record<string, unknown>, severity: string) => Object.assign(Object.create(Object.getPrototypeOf(error)), error, { severity });

if (!url) {
  console.log('  server errors: skipped — needs a Postgres server (DATABASE_URL); embedded PGlite has no connections to lose');
} else {
  t("a statement's error leaves the connection usable, in English or translated, and the connection is indeed usable", async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const divide = await caught(() => client.query(`select 1/0`));
      assert.is(divide.severity, 'ERROR');
      assert.ok(isStatementError(divide));
      assert.ok(isStatementError(translated(divide, 'FEHLER')));
      await client.query(`set statement_timeout = '10ms'`);
      const timeout = await caught(() => client.query('select pg_sleep(1)'));
      assert.is(timeout.code, '57014');
      assert.ok(isStatementError(translated(timeout, 'ERREUR')), 'a cancelled statement (class 57, not 57P) ends nothing');
      assert.is((await client.query('select 1 as one')).rows[0].one, 1);
    } finally {
      await client.end();
    }
  });

  t('an error that ends the session, or a lost connection, does not', async () => {
    const victim = new pg.Client({ connectionString: url });
    const admin = new pg.Client({ connectionString: url });
    victim.on('error', () => undefined);
    await victim.connect();
    await admin.connect();
    try {
      const pid = (await victim.query('select pg_backend_pid() as pid')).rows[0].pid;
      const sleeping = caught(() => victim.query('select pg_sleep(5)'));
      await new Promise((r) => setTimeout(r, 100));
      await admin.query('select pg_terminate_backend($1)', [pid]);
      const fatal = await sleeping;
      assert.is(fatal.code, '57P01');
      assert.is(fatal.severity, 'FATAL');
      assert.not.ok(isStatementError(fatal));
      assert.not.ok(isStatementError(translated(fatal, 'SCHWERWIEGEND')), 'judged by its class when the severity is not English');
      const lost = await caught(() => victim.query('select 1'));
      assert.not.ok(isStatementError(lost), `the query on the closed connection: ${String(lost.message)}`);
    } finally {
      await victim.end().catch(() => undefined);
      await admin.end();
    }
  });
}

t("errors that are not a server's, and severities nobody sends, are not statement errors", () => {
  assert.not.ok(isStatementError(new Error('socket hang up')));
  assert.not.ok(isStatementError(null));
  assert.not.ok(isStatementError({ severity: 'ERREUR' }), 'a severity without a SQLSTATE');
  assert.not.ok(isStatementError({ severity: 'PANIC', code: '23505' }));
  assert.ok(isStatementError({ severity: 'ERROR', code: 'WR001' }));
  assert.ok(isStatementError({ severity: 'FEHLER', code: 'WR002' }), "this service's own refusals (class WR)");
});

t.run();
