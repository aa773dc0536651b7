import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { WorkflowReadCache, type KeptRead } from '../../src/services/runs/workflow-cache.ts';

const read = (token: string) => ({ row: {}, token }) as unknown as KeptRead;

test('a kept workflow read is given back until its time is up, per caller and workflow', () => {
  const c = new WorkflowReadCache(10, 1000);
  c.set('a', 'w', read('t1'), 0);
  assert.is(c.get('a', 'w', 999)?.token, 't1');
  assert.is(c.get('b', 'w', 10), undefined);
  assert.is(c.get('a', 'w', 1000), undefined);
  assert.is(c.get('a', 'w', 10), undefined, 'an expired read is dropped');
  c.set('a', 'w', read('t2'), 0);
  c.drop('a', 'w');
  assert.is(c.get('a', 'w', 1), undefined);
});

test('a full cache lets the least recently used read go first', () => {
  const c = new WorkflowReadCache(2, 1000);
  c.set('a', 'w1', read('1'), 0);
  c.set('a', 'w2', read('2'), 0);
  assert.ok(c.get('a', 'w1', 1));
  c.set('a', 'w3', read('3'), 2);
  assert.is(c.get('a', 'w2', 3), undefined);
  assert.is(c.get('a', 'w1', 3)?.token, '1');
  assert.is(c.get('a', 'w3', 3)?.token, '3');
});

test.run();
