import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * Runs the uvu suites and ends with the one summary line CI reads: `N passed, M failed`.
 * uvu's own summary is parsed rather than trusted as the last line; a crash before any summary
 * counts as a failure.
 */

const root = fileURLToPath(new URL('..', import.meta.url));
const pattern = process.argv[2] ?? '\\.test\\.ts$';
const child = spawn(
  process.execPath,
  ['--import', 'tsx', 'test/uvu-entry.ts', pattern],
  { cwd: root, stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, FORCE_COLOR: '0' } },
);

let out = '';
child.stdout.on('data', (chunk: Buffer) => {
  process.stdout.write(chunk);
  out += chunk.toString('utf8');
  if (out.length > 1_000_000) out = out.slice(-100_000);
});

child.on('close', (code) => {
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
