import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { findTemporalCli, freePort, startDevServer } from '../../src/engine/temporal/dev-server.ts';
import { runToEnd, startService } from '../helpers/service-process.ts';
import { countTemporal } from '../helpers/temporal.ts';
import { waitFor } from '../helpers/wait-for.ts';

/**
 * `npm start` with ENGINE=temporal started before Temporal: it tries again (TEMPORAL_CONNECT_ATTEMPTS,
 * TEMPORAL_CONNECT_INTERVAL_MS), one log line per failed try, and comes up once a dev server answers;
 * when none does within the tries it exits with the one unreachable line.
 */

const cli = findTemporalCli(process.env);
if (!cli) console.log('  wait for temporal: no Temporal CLI; SKIPPED');

/** An API-only process (no worker to bundle: quicker to start) on a Temporal address nothing answers yet. */
const apiEnv = (dataDir: string, port: number) => ({ DATA_DIR: dataDir, ENGINE: 'temporal', TEMPORAL_WORKER: 'off', TEMPORAL_ADDRESS: `127.0.0.1:${port}` });
const triesIn = (output: string) => output.split('\n').filter((line) => line.includes('Temporal is not reachable') && line.includes('"attempt"')).length;

if (cli) {
  test(
    'the API started before the Temporal server waits for it, logging each try, and comes up when it answers',
    countTemporal(async () => {
      const dir = mkdtempSync(join(tmpdir(), 'wr-wait-temporal-'));
      const port = await freePort();
      const api = startService({ ...apiEnv(dir, port), TEMPORAL_CONNECT_ATTEMPTS: '200', TEMPORAL_CONNECT_INTERVAL_MS: '500' }, { upWithinMs: 240_000 });
      let server: Awaited<ReturnType<typeof startDevServer>> | null = null;
      try {
        await waitFor('two failed tries', () => triesIn(api.output()) >= 2, 180_000, 100);
        server = await startDevServer({ cli, port });
        const url = await api.url;
        assert.is((await fetch(`${url}/readyz`)).status, 200);
        const tries = triesIn(api.output());
        assert.ok(tries >= 2, `${tries} tries logged`);
        assert.match(api.output(), '"attempts":200');
      } finally {
        await api.stop();
        await server?.stop();
        rmSync(dir, { recursive: true, force: true });
      }
    }),
  );

  test(
    'with no Temporal server the API gives up after TEMPORAL_CONNECT_ATTEMPTS tries with one clear line',
    countTemporal(async () => {
      const dir = mkdtempSync(join(tmpdir(), 'wr-wait-temporal-'));
      try {
        const port = await freePort();
        const env = { ...apiEnv(dir, port), PORT: '0', TEMPORAL_CONNECT_ATTEMPTS: '3', TEMPORAL_CONNECT_INTERVAL_MS: '100' };
        const result = await runToEnd(['src/main.ts'], env, 240_000);
        assert.is(result.code, 2);
        assert.is(triesIn(result.stdout), 2, 'a line for each try that is followed by another');
        assert.match(result.stderr, `Temporal is not reachable at 127.0.0.1:${port}`);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }),
  );
}

test.run();
