import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { resumeCursors, resumedTailProblem, resumeSse } from '../../helpers/sse-frames.ts';
import { W_DELAY, W_LONG_DELAY } from './helpers/catalog.ts';
import { engineCases, runEvents, scenario, settle, sleep, startRun, withE2e, type E2e } from './helpers/harness.ts';

/**
 * A stream resumed with a cursor (Last-Event-ID or afterSequence) ends after the run's terminal event
 * whatever the cursor, on every engine: below the run's last sequence it delivers the rest and ends
 * with the terminal event; at or past it (the terminal event is one the client claims to have) it
 * ends when the run ends; on a run already finished it closes at once. Every stream gives its
 * open-stream slot back.
 */

const TERMINAL = new Set(['run.completed', 'run.failed', 'run.cancelled']);
const CURSORS_PER_RUN = 6;

/** The last sequence a W_DELAY run ends at on this engine (the cursors are placed around it). */
async function lastSequenceOfARun(e: E2e): Promise<number> {
  const id = await startRun(e, W_DELAY);
  await settle(e, id);
  const log = await runEvents(e, id);
  assert.ok(TERMINAL.has(log.at(-1)!.type), `the log ends with ${log.at(-1)!.type}`);
  return log.at(-1)!.sequence;
}

for (const engine of engineCases('rest e2e: resumed SSE streams')) {
  scenario(engine, 'a stream resumed below, at or past the last event of a live run ends after the run ends, and gives its slot back', async () => {
    await withE2e(engine, { env: { MAX_STREAMS_PER_KEY: String(CURSORS_PER_RUN) } }, async (e) => {
      const cursors = resumeCursors(await lastSequenceOfARun(e));
      assert.ok(cursors.length <= CURSORS_PER_RUN);
      const streams = await Promise.all(
        cursors.map(async (cursor, i) => {
          const id = await startRun(e, W_DELAY);
          const sse = resumeSse(e.t.base, id, cursor, 'wr_test_bob', i % 2 === 1);
          assert.is(await sse.status, 200, `cursor ${cursor}`);
          const ended = await Promise.race([sse.ended.then(() => Date.now()), sleep(engine.timeoutMs).then(() => null)]);
          sse.close();
          return { id, cursor, sse, ended };
        }),
      );
      for (const { id, cursor, sse, ended } of streams) {
        const run = await settle(e, id);
        assert.ok(ended !== null, `cursor ${cursor}: the stream was still open ${engine.timeoutMs} ms after it opened (run ${run.status})`);
        assert.ok(['pending', 'running'].includes(sse.frames[0]!.data.status), `cursor ${cursor}: opened while the run was live`);
        const late = ended! - Date.parse(run.completedAt);
        assert.ok(late < 3000, `cursor ${cursor}: the stream ended ${late} ms after the run did`);
        assert.is(resumedTailProblem(sse.frames, await runEvents(e, id), cursor), null);
      }
      // Every slot was given back (a kept one would make one of these a 429): as many streams again on one live run.
      await sleep(200);
      const id = await startRun(e, W_LONG_DELAY);
      const again = cursors.map((cursor) => resumeSse(e.t.base, id, cursor, 'wr_test_bob', false));
      try {
        assert.equal(
          await Promise.all(again.map((s) => s.status)),
          cursors.map(() => 200),
        );
      } finally {
        for (const s of again) s.close();
      }
    });
  });

  scenario(engine, 'a stream resumed at or past the end of a finished run sends its snapshot and closes at once', async () => {
    await withE2e(engine, {}, async (e) => {
      const last = await lastSequenceOfARun(e);
      const id = await startRun(e, W_DELAY);
      await settle(e, id);
      for (const [i, cursor] of resumeCursors(last).entries()) {
        const at = Date.now();
        const sse = resumeSse(e.t.base, id, cursor, 'wr_test_bob', i % 2 === 0);
        const ended = await Promise.race([sse.ended.then(() => true), sleep(3000).then(() => false)]);
        sse.close();
        assert.ok(ended, `cursor ${cursor}: still open after 3 s`);
        assert.ok(Date.now() - at < 3000);
        assert.equal(
          sse.frames.map((f) => f.type),
          ['snapshot'],
          `cursor ${cursor}`,
        );
        assert.is(sse.frames[0]!.data.status, 'completed');
      }
    });
  });
}

test.run();
