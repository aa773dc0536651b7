import fc from 'fast-check';
// @ts-expect-error pg/lib/utils has no type declarations
import pgUtils from 'pg/lib/utils.js';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { sqlLiteral } from '../../src/db/sql-literal.ts';

const { prepareValue, escapeLiteral } = pgUtils as { prepareValue: (v: unknown) => unknown; escapeLiteral: (s: string) => string };

/** What src/db/prepared.ts sent before: pg's own conversion, then pg's own quoting. */
const pgLiteral = (v: unknown): string => (v === null || v === undefined ? 'null' : escapeLiteral(String(prepareValue(v))));

// Strings rich in what is escaped: quotes, backslashes, double quotes, braces, commas, non-ASCII.
const tricky = fc.string({ unit: fc.constantFrom("'", '\\', '"', '{', '}', ',', ' ', 'a', 'é', '😀', 'E', 'x', '\n') });
const text = fc.oneof(tricky, fc.string(), fc.uuid());
const scalar = fc.oneof(text, fc.integer(), fc.double({ noNaN: true }), fc.boolean(), fc.constant(null), fc.bigInt());
const element = fc.oneof(text, fc.integer(), fc.constant(null), fc.constant(undefined), fc.json().map((j) => JSON.parse(j) as unknown));
const array = fc.oneof(fc.array(element), fc.array(fc.array(fc.oneof(text, fc.constant(null)))), fc.array(fc.uint8Array().map((b) => Buffer.from(b))));

test('a parameter is quoted byte for byte as pg quotes it: strings, numbers, arrays of strings, nulls, JSON, buffers', () => {
  fc.assert(
    fc.property(fc.oneof(scalar, array, fc.object(), fc.date({ noInvalidDate: true })), (v) => sqlLiteral(v) === pgLiteral(v)),
    { numRuns: 5000 },
  );
});

test('a string with a backslash becomes an E literal, and quotes are doubled', () => {
  assert.is(sqlLiteral("it's"), "'it''s'");
  assert.is(sqlLiteral('a\\b'), " E'a\\\\b'");
  assert.is(sqlLiteral(['"x"', null, 'a\\b']), ` E'{"\\\\"x\\\\"",NULL,"a\\\\\\\\b"}'`);
  assert.is(sqlLiteral(undefined), 'null');
});

test('an array element pg cannot turn into text is refused as pg refuses it, not sent as some other text', () => {
  for (const v of [[{ toPostgres: () => null }], [[{ toPostgres: () => Buffer.from('x') }]], [{ toJSON: () => undefined }]]) {
    assert.throws(() => pgLiteral(v), TypeError);
    assert.throws(() => sqlLiteral(v), TypeError);
  }
});

test.run();
