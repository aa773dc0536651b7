import fc from 'fast-check';
// @ts-expect-error pg/lib/utils has no type declarations
import pgUtils from 'pg/lib/utils.js';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { paramText } from '../../src/db/param-text.ts';

const { prepareValue } = pgUtils as { prepareValue: (v: unknown) => unknown };

/** What pg binds for a parameter of its own queries. */
const pgParam = (v: unknown): unknown => prepareValue(v) ?? null;

// Strings rich in what is escaped: quotes, backslashes, double quotes, braces, commas, non-ASCII.
const tricky = fc.string({ unit: fc.constantFrom("'", '\\', '"', '{', '}', ',', ' ', 'a', 'é', '😀', 'E', 'x', '\n') });
const text = fc.oneof(tricky, fc.string(), fc.uuid());
const scalar = fc.oneof(text, fc.integer(), fc.double({ noNaN: true }), fc.boolean(), fc.constant(null), fc.constant(undefined), fc.bigInt());
const element = fc.oneof(text, fc.integer(), fc.constant(null), fc.constant(undefined), fc.json().map((j) => JSON.parse(j) as unknown));
const array = fc.oneof(fc.array(element), fc.array(fc.array(fc.oneof(text, fc.constant(null)))), fc.array(fc.uint8Array().map((b) => Buffer.from(b))));

test('a parameter is bound byte for byte as pg binds it: strings, numbers, arrays of strings, nulls, JSON, buffers, dates', () => {
  fc.assert(
    fc.property(fc.oneof(scalar, array, fc.object(), fc.date({ noInvalidDate: true }), fc.uint8Array().map((b) => Buffer.from(b))), (v) => {
      assert.equal(paramText(v), pgParam(v));
    }),
    { numRuns: 5000 },
  );
});

test('an array keeps quotes, backslashes and nulls as pg writes them', () => {
  assert.is(paramText(['"x"', null, 'a\\b']), '{"\\"x\\"",NULL,"a\\\\b"}');
  assert.is(paramText([["it's"], [null]]), `{{"it's"},{NULL}}`);
  assert.is(paramText(undefined), null);
});

test('an array element pg cannot turn into text is refused as pg refuses it, not sent as some other text', () => {
  for (const v of [[{ toPostgres: () => null }], [[{ toPostgres: () => Buffer.from('x') }]], [{ toJSON: () => undefined }]]) {
    assert.throws(() => pgParam(v), TypeError);
    assert.throws(() => paramText(v), TypeError);
  }
});

test.run();
