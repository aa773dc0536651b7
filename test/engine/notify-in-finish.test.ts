import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { messagesWhile } from '../helpers/round-trips.ts';
import { startTestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait-for.ts';

/**
 * The NOTIFY a run finished in memory carries while the run event bus is quiet (src/runs/start-and-complete.ts,
 * FINISH_RUNS): the embedded engine on a Postgres server, another process listening.
 */

const url = process.env.DATABASE_URL;
const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';

if (!url) {
  console.log('  notify in the finishing statement: skipped — DATABASE_URL not set (LISTEN/NOTIFY needs a Postgres server)');
} else {
  test('a run finished while the bus is quiet is announced to other processes by its finishing statement’s own transaction, and the bus sends nothing for it', async () => {
    const t = await startTestApp({ engine: 'app' });
    const other = new pg.Client({ connectionString: url });
    const heard: string[] = [];
    other.on('notification', (n) => heard.push(n.payload ?? ''));
    await other.connect();
    try {
      await other.query('listen run_events');
      await new Promise((r) => setTimeout(r, 100)); // the engine's start; the bus quiet
      let runId = '';
      const { messages } = await messagesWhile(async () => {
        const res = await t.call('POST', '/runs', { key: 'wr_test_alice', body: { workflow: W_SUMMARY, inputs: { topic: 'quiet' } } });
        assert.is(res.status, 202, JSON.stringify(res.body));
        runId = (res.body as { run: { id: string } }).run.id;
        await waitFor(
          'the run to complete',
          async () => ((await t.call('GET', `/runs/${runId}`, { key: 'wr_test_alice' })).body as { status: string }).status === 'completed',
          5_000,
        );
        await new Promise((r) => setTimeout(r, 50)); // anything the bus would still send
      });
      const [row] = await t.deps.orm.em.fork().execute<{ last_sequence: number }[]>('select last_sequence from runs where id = ?', [runId]);
      await waitFor('the other process to hear the run', async () => heard.some((p) => p.split(',').includes(`${runId}:${row!.last_sequence}`)), 2_000);
      const finishing = messages.filter((m) => m.split('; ').includes('finish_runs'));
      assert.is(finishing.length, 1, messages.join('\n'));
      assert.is(messages.filter((m) => m === 'notify_each').length, 0, 'the bus sent no NOTIFY of its own');
    } finally {
      await other.end();
      await t.close();
    }
  });
}

test.run();
