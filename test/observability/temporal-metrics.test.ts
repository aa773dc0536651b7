import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { moved, scrape, value } from '../helpers/metrics.ts';
import { startService } from '../helpers/service-process.ts';
import { countTemporal, temporalAddress } from '../helpers/temporal.ts';

/**
 * With ENGINE=temporal, `npm start` (a real child process, so the SDK runtime is installed fresh) serves
 * the Temporal SDK's own metrics on TEMPORAL_METRICS_ADDRESS next to the service's /metrics, and a demo
 * run moves both.
 */

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

const address = temporalAddress('observability: temporal metrics');
if (address) {
  test(
    '[temporal] the worker serves the SDK metrics (temporal_*) on TEMPORAL_METRICS_ADDRESS, and a demo run moves them and /metrics',
    countTemporal(async () => {
      const dir = mkdtempSync(join(tmpdir(), 'wr-temporal-metrics-'));
      const sdkAddress = `127.0.0.1:${await freePort()}`;
      const svc = startService({
        DATA_DIR: dir,
        DATABASE_URL: '',
        ENGINE: 'temporal',
        TEMPORAL_ADDRESS: address,
        TEMPORAL_TASK_QUEUE: `metrics-${randomUUID()}`,
        TEMPORAL_METRICS_ADDRESS: sdkAddress,
        LOG_LEVEL: 'warn',
      });
      try {
        const url = await svc.url;
        const before = await scrape(`${url}/metrics`);
        const key = { authorization: 'Bearer wr_demo_key', 'content-type': 'application/json' };
        const res = await fetch(`${url}/v1/runs`, {
          method: 'POST',
          headers: key,
          body: JSON.stringify({ workflow: '00000000-0000-4000-8000-00000000f001', inputs: { name: 'Ada', tone: 'casual' } }),
        });
        assert.is(res.status, 202);
        const runId = ((await res.json()) as { run: { id: string } }).run.id;
        const until = Date.now() + 60_000;
        let status = '';
        while (!['completed', 'failed', 'cancelled'].includes(status)) {
          if (Date.now() > until) throw new Error(`run ${runId} not terminal: ${status}\n${svc.output()}`);
          await new Promise((r) => setTimeout(r, 100));
          status = ((await (await fetch(`${url}/v1/runs/${runId}`, { headers: key })).json()) as { status: string }).status;
        }
        assert.is(status, 'completed');

        const after = await scrape(`${url}/metrics`);
        assert.is(moved(before, after, 'wr_runs_accepted_total'), 1);
        assert.is(moved(before, after, 'wr_runs_started_total'), 1);
        assert.is(moved(before, after, 'wr_runs_finished_total', { status: 'completed', outcome: 'completed' }), 1);

        // The run is terminal in Postgres before its workflow's last task completes: wait for that.
        let sdk = await scrape(`http://${sdkAddress}/metrics`);
        while (!((value(sdk, 'temporal_workflow_completed_total') ?? 0) >= 1)) {
          if (Date.now() > until) assert.unreachable(`no completed workflow in the SDK metrics:\n${sdk.text.slice(0, 2000)}`);
          await new Promise((r) => setTimeout(r, 200));
          sdk = await scrape(`http://${sdkAddress}/metrics`);
        }
        const names = [...sdk.families.keys()];
        assert.ok(names.length > 0 && names.every((n) => n.startsWith('temporal_')), `SDK series: ${names.slice(0, 5).join(', ')}`);
        // The three-template run's work is one local activity (advanceRun).
        assert.ok((value(sdk, 'temporal_local_activity_execution_latency_seconds') ?? 0) >= 1, 'its local activity ran');
      } finally {
        await svc.stop();
        rmSync(dir, { recursive: true, force: true });
      }
    }),
  );
}

test.run();
