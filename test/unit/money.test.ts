import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { sum, toDb, toJson, usd } from '../../src/domain/money.ts';

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

test.run();
