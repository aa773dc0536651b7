import { test } from 'uvu';
import * as assert from 'uvu/assert';

/**
 * The Temporal half of the suite. `test/run.ts` starts a Temporal dev server (the CLI from
 * TEMPORAL_CLI, .venv-temporal/bin or PATH) and hands its address to the test process as
 * TEMPORAL_ADDRESS. A suite asks `temporalAddress(suite)`: the address, or null after printing why it
 * skips. With REQUIRE_TEMPORAL=1 (CI) a skip is a failing test instead. Tests of the Temporal half are
 * counted (`countTemporal`) so the run ends with how many of them ran and passed.
 */

let registered = 0;
let passed = 0;

export function temporalAddress(suite: string): string | null {
  const address = process.env.TEMPORAL_ADDRESS;
  if (address) return address;
  const why = process.env.TEMPORAL_SKIP_REASON ?? 'TEMPORAL_ADDRESS is not set';
  if (process.env.REQUIRE_TEMPORAL === '1') {
    test(`${suite}: the Temporal half runs (REQUIRE_TEMPORAL=1)`, () => {
      assert.unreachable(`no Temporal server: ${why}`);
    });
  } else {
    console.log(`  ${suite}: Temporal half SKIPPED — ${why}`);
  }
  return null;
}

/** Wraps a Temporal test body so the run's summary counts it. */
export function countTemporal<A extends unknown[]>(fn: (...args: A) => Promise<void> | void): (...args: A) => Promise<void> {
  registered++;
  return async (...args: A) => {
    await fn(...args);
    passed++;
  };
}

/** For the test process's last lines; null when no Temporal test was registered. */
export function temporalSummary(): string | null {
  if (registered === 0) return null;
  return `temporal half: ${passed} of ${registered} tests passed against a live Temporal server`;
}
