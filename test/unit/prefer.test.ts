import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { parsePrefer, preferredWaitSeconds } from '../../src/http/prefer.ts';

/** The Prefer header (RFC 7240) as POST /runs reads it (docs/design/prefer-wait.md). */

test('preferences are comma-separated, case-insensitive by name, first occurrence wins, parameters dropped', () => {
  const p = parsePrefer('respond-async, WAIT=10; foo=bar, wait=3, handling="lenient"');
  assert.equal(
    [...p],
    [
      ['respond-async', ''],
      ['wait', '10'],
      ['handling', 'lenient'],
    ],
  );
});

test('a quoted value may contain commas and semicolons', () => {
  assert.equal(
    [...parsePrefer('x="a, b; c", wait="7"')],
    [
      ['x', 'a, b; c'],
      ['wait', '7'],
    ],
  );
});

test('wait=N is whole seconds in 1..max; more is capped, anything else is ignored', () => {
  assert.is(preferredWaitSeconds('wait=10', 60), 10);
  assert.is(preferredWaitSeconds(' wait = 5 ', 60), 5);
  assert.is(preferredWaitSeconds('wait=61', 60), 60);
  assert.is(preferredWaitSeconds('wait=99999999999999999999', 60), 60);
  for (const h of [undefined, '', 'wait', 'wait=', 'wait=0', 'wait=-1', 'wait=1.5', 'wait=1e3', 'wait=soon', 'respond-async', 'wai t=3', '=3']) {
    assert.is(preferredWaitSeconds(h, 60), null, String(h));
  }
});

test.run();
