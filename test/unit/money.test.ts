import fc from 'fast-check';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { sum, toDb, toJson, usd } from '../../src/domain/money.ts';
import { isoOrNull } from '../../src/db/sql.ts';

test('adding six-decimal amounts stays exact where binary floats drift', () => {
  assert.is(toDb(usd('0.123457').plus('0.000100')), '0.123557');
  assert.is(toDb(sum(['0.1', '0.2'])), '0.300000');
  assert.is.not(0.1 + 0.2, 0.3);
});

test('token pricing keeps sub-cent precision until the final six places', () => {
  // 1234 tokens at $0.15 per million = 0.0001851, rounded half-up once at storage.
  assert.is(toDb(usd('0.15').times(1234).div(1_000_000)), '0.000185');
  assert.is(toDb(usd('0.15').times(1234).div(1_000_000).times(10)), '0.001851');
});

test('amounts leave the API as JSON numbers that print back to the same six places', () => {
  assert.is(toJson('0.123557'), 0.123557);
  assert.is(JSON.stringify({ v: toJson('25.000001') }), '{"v":25.000001}');
});

test('a six-place amount as read from the database becomes the same JSON number as through the decimal arithmetic', () => {
  const sixPlaces = fc
    .tuple(fc.boolean(), fc.bigInt({ min: 0n, max: 999_999_999_999_999_999n }))
    .map(([negative, units]) => `${negative ? '-' : ''}${units / 1_000_000n}.${String(units % 1_000_000n).padStart(6, '0')}`);
  fc.assert(
    fc.property(sixPlaces, (text) => Object.is(toJson(text), Number(toDb(text)))),
    { numRuns: 5000 },
  );
  for (const text of ['0.000000', '-0.000000', '007.100000', '999999999999.999999', '1.5', '1e3']) {
    assert.ok(Object.is(toJson(text), Number(toDb(text))), text);
  }
});

/** The timestamp conversion before its fast path for Postgres's UTC text. */
const viaDate = (v: string) => new Date(v.replace(' ', 'T').replace(/\+00$/, 'Z')).toISOString();

test('timestamps read as text print as the ISO string Date prints, and what Date rolls over or rejects is still left to Date', () => {
  const two = (n: number) => String(n).padStart(2, '0');
  const text = fc
    .tuple(
      fc.integer({ min: 1, max: 9999 }),
      fc.integer({ min: 0, max: 13 }),
      fc.integer({ min: 0, max: 32 }),
      fc.integer({ min: 0, max: 24 }),
      fc.integer({ min: 0, max: 60 }),
      fc.integer({ min: 0, max: 60 }),
      fc.option(fc.stringMatching(/^[0-9]{1,7}$/)),
      fc.constantFrom('+00', '+00', '+01', '-05:30', 'Z'),
    )
    .map(
      ([y, mo, d, h, mi, s, frac, zone]) =>
        `${String(y).padStart(4, '0')}-${two(mo)}-${two(d)} ${two(h)}:${two(mi)}:${two(s)}${frac === null ? '' : `.${frac}`}${zone}`,
    );
  const outcome = (f: () => string | null) => {
    try {
      return f();
    } catch (err) {
      return (err as Error).name;
    }
  };
  fc.assert(
    fc.property(text, (t) => outcome(() => isoOrNull(t)) === outcome(() => viaDate(t))),
    { numRuns: 20000 },
  );
  for (const t of [
    '2024-02-29 23:59:59.999999+00',
    '2026-02-29 00:00:00+00',
    '2026-04-31 12:00:00.5+00',
    '2026-11-24 22:33:21.12+00',
    '2026-11-24 24:00:00+00',
  ]) {
    assert.is(
      outcome(() => isoOrNull(t)),
      outcome(() => viaDate(t)),
      t,
    );
  }
  assert.is(isoOrNull('2026-11-24 22:33:21.123456+00'), '2026-11-24T22:33:21.123Z');
});

test.run();
