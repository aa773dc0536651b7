import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp } from '../helpers/app.ts';
import { statementsWhile } from '../helpers/statement-log.ts';

/**
 * Idle means idle (docs/operations.md#idle): a process with nothing in flight (the embedded engine, the
 * webhook dispatcher, the idempotency sweeper, the stream slots, all started) sends at most one
 * statement per 10 s to the database, so a serverless Postgres may sleep. Counted through the ORM's
 * statement log, as bench/server.ts counts statements (each is its own transaction here).
 */

/** IDLE_WINDOW_MS=65000 measures over a longer window. */
const WINDOW_MS = Number(process.env.IDLE_WINDOW_MS ?? 20_000);
/** One statement per 10 s. */
const MOST = WINDOW_MS / 10_000;

test(`an idle process sends at most ${MOST} statements in ${WINDOW_MS / 1000} s`, async () => {
  const t = await startTestApp({ engine: 'app' });
  try {
    // The start's own work (recovery, the first sweeps) is done within a few seconds.
    await new Promise((r) => setTimeout(r, 4_000));
    const { sql } = await statementsWhile(t.deps.orm, () => new Promise((r) => setTimeout(r, WINDOW_MS)));
    const statements = sql.filter((q) => !/^(begin|commit|rollback)\b/i.test(q.trim()));
    console.log(`  idle: ${statements.length} statements in ${WINDOW_MS / 1000} s`);
    assert.ok(statements.length <= MOST, `${statements.length} statements while idle:\n${statements.map((q) => q.slice(0, 120)).join('\n')}`);
  } finally {
    await t.close();
  }
});

test.run();
