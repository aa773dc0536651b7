import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { InexactNumber, inexactNumberIn, isExactNumber, parseJson } from '../../src/domain/exact-json.ts';
import { jsonLimitProblem } from '../../src/domain/json-limits.ts';

/** parseJson keeps numbers a double holds exactly and marks the others with their text. */

test('numbers whose text a double holds exactly are plain numbers', () => {
  for (const text of [
    '0',
    '-0',
    '1',
    '1.0',
    '1e2',
    '1E+2',
    '100e-2',
    '0.1',
    '0.30000000000000004',
    '-12.5',
    '9007199254740991',
    '1e21',
    '1.7976931348623157e308',
    '5e-324',
    '123456789012345680000000000000',
    '0.0000000000000001',
  ]) {
    const parsed = parseJson(`{"v":[${text}]}`) as { v: unknown[] };
    assert.type(parsed.v[0], 'number', text);
    assert.is(parsed.v[0], Number(text), text);
  }
});

test('numbers a double does not hold exactly are InexactNumber with the text as sent', () => {
  for (const text of [
    '1e400',
    '-1e400',
    '2e308',
    '1e-400',
    '123456789012345678901234567890',
    '9007199254740993',
    '0.10000000000000001',
    '1.00000000000000001',
  ]) {
    const parsed = parseJson(`{"a": {"b": [1, ${text}]}}`) as { a: { b: unknown[] } };
    assert.instance(parsed.a.b[1], InexactNumber, text);
    assert.is((parsed.a.b[1] as InexactNumber).source, text);
    assert.is(inexactNumberIn(parsed)?.source, text);
  }
});

test('text that only looks like a number inside a string is kept as it is', () => {
  const parsed = parseJson('{"s": "x:1e400", "t": ",12345678901234567890", "u": "6c0a4d9e-1111-4e11-8111-111111111111"}');
  assert.equal(parsed, { s: 'x:1e400', t: ',12345678901234567890', u: '6c0a4d9e-1111-4e11-8111-111111111111' });
  assert.is(inexactNumberIn(parsed), null);
});

test('a root number stays a number; invalid JSON throws as JSON.parse does', () => {
  assert.is(parseJson('1e400'), Infinity);
  assert.throws(() => parseJson('{"a": 1e400'), SyntaxError);
});

test('nesting deeper than the stack is parsed, not refused as invalid JSON (the body checks refuse its depth)', () => {
  const deep = `{"inputs": {"a": 1e5, "b": ${'['.repeat(20_000)}1e400${']'.repeat(20_000)}}}`;
  const parsed = parseJson(deep) as { inputs: { a: number } };
  assert.is(parsed.inputs.a, 100000);
  assert.ok(jsonLimitProblem(parsed), 'refused for its depth');
});

test('isExactNumber compares decimal values, not texts', () => {
  assert.ok(isExactNumber('1.50', 1.5));
  assert.ok(isExactNumber('-0.0e5', -0));
  assert.not.ok(isExactNumber('1e400', Infinity));
});

test.run();
