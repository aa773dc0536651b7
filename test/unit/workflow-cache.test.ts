import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { WorkflowReadCache, type KeptRead } from '../../src/runs/workflow-cache.ts';

const read = (token: string) => ({ row: {}, token }) as unknown as KeptRead;
const tick = () => new Promise((r) => setImmediate(r));

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

test('a kept read past half its time begins one read ahead, kept from when it began', async () => {
  const c = new WorkflowReadCache(10, 1000);
  c.set('a', 'w', read('t1'), 0);
  const begun: ((r: KeptRead | null) => void)[] = [];
  const ahead = () => new Promise<KeptRead | null>((resolve) => begun.push(resolve));
  c.readAhead('a', 'w', ahead, 499);
  assert.is(begun.length, 0, 'a young read begins none');
  c.readAhead('a', 'w', ahead, 500);
  c.readAhead('a', 'w', ahead, 600);
  assert.is(begun.length, 1, 'one read ahead at a time');
  assert.is(c.get('a', 'w', 700)?.token, 't1', 'the kept read answers meanwhile');
  begun[0]!(read('t2'));
  await tick();
  assert.is(c.get('a', 'w', 1400)?.token, 't2', "past the first read's time, the read ahead answers");
  assert.is(c.get('a', 'w', 1500), undefined, 'it was kept from when it began');
  c.readAhead('b', 'w', ahead, 2000);
  assert.is(begun.length, 1, 'nothing kept, nothing read ahead');
});

test('a read ahead that no longer finds the workflow drops it; one that fails, lost to a newer read or began before a drop changes nothing', async () => {
  const c = new WorkflowReadCache(10, 1000);
  c.set('a', 'w', read('t1'), 0);
  c.readAhead('a', 'w', async () => null, 600);
  await tick();
  assert.is(c.get('a', 'w', 601), undefined);
  c.set('a', 'w', read('t1'), 0);
  c.readAhead('a', 'w', async () => Promise.reject(new Error('database gone')), 600);
  await tick();
  assert.is(c.get('a', 'w', 601)?.token, 't1');
  c.set('a', 'w', read('t1'), 0);
  let finish!: (r: KeptRead | null) => void;
  c.readAhead('a', 'w', () => new Promise((resolve) => (finish = resolve)), 600);
  c.set('a', 'w', read('t3'), 700);
  finish(read('t2'));
  await tick();
  assert.is(c.get('a', 'w', 701)?.token, 't3', 'a read begun later is kept');
  c.readAhead('a', 'w', () => new Promise((resolve) => (finish = resolve)), 1300);
  c.drop('a', 'w');
  finish(read('t4'));
  await tick();
  assert.is(c.get('a', 'w', 1301), undefined, 'a read ahead begun before a drop keeps nothing');
  c.set('a', 'w', read('t5'), 2000);
  c.readAhead('a', 'w', () => new Promise((resolve) => (finish = resolve)), 2600);
  c.drop('b', 'w');
  finish(read('t6'));
  await tick();
  assert.is(c.get('a', 'w', 3100)?.token, 't6', "a drop of another caller's read cancels nothing here");
});

test.run();
