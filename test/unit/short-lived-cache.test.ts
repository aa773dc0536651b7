import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ShortLivedCache } from '../../src/db/short-lived-cache.ts';

const t = suite('a short-lived cache of rarely changing rows');

/** A read the test finishes by hand, counting how often it was begun. */
function reads<V>() {
  const begun: { finish: (v: V | null) => void; fail: (e: Error) => void }[] = [];
  const read = () => new Promise<V | null>((resolve, reject) => begun.push({ finish: resolve, fail: reject }));
  return { begun, read };
}

const tick = () => new Promise((r) => setImmediate(r));

/** Kept reads of one second on a clock the test moves (`clock.now`), with 'v1' read at 0. */
async function keptV1() {
  const clock = { now: 0 };
  const kept = new ShortLivedCache<string>(1000, 100, () => clock.now);
  const { begun, read } = reads<string>();
  const first = kept.get('k', read);
  begun[0]!.finish('v1');
  await first;
  return { clock, kept, begun, read };
}

t('callers of an expired key share one read instead of each sending their own', async () => {
  let now = 0;
  const kept = new ShortLivedCache<string>(1000, 100, () => now);
  const { begun, read } = reads<string>();
  const answers = Promise.all(Array.from({ length: 32 }, () => kept.get('k', read)));
  assert.is(begun.length, 1);
  begun[0]!.finish('v1');
  assert.equal(new Set(await answers), new Set(['v1']));
  now = 1000;
  const later = Promise.all([kept.get('k', read), kept.get('k', read)]);
  assert.is(begun.length, 2, 'a value ttlMs old is read again, once');
  begun[1]!.finish('v2');
  assert.equal(await later, ['v2', 'v2']);
});

t('a value past half its time is answered at once while the next read runs in the background', async () => {
  const { clock, kept, begun, read } = await keptV1();
  clock.now = 400;
  assert.is(await kept.get('k', read), 'v1');
  assert.is(begun.length, 1, 'a young value starts no read');
  clock.now = 600;
  assert.is(await kept.get('k', read), 'v1', 'nobody waits for the read ahead');
  assert.is(await kept.get('k', read), 'v1');
  assert.is(begun.length, 2, 'one read ahead, whoever asks meanwhile');
  assert.is(kept.peek('k'), 'v1', 'peek answers the kept value');
  begun[1]!.finish('v2');
  await tick();
  clock.now = 1050;
  assert.is(await kept.get('k', read), 'v2', "past the first value's time, the value read ahead is answered");
  assert.is(begun.length, 2, 'and it is young enough to start no read');
});

t('a value is never answered once its time since the read began is up', async () => {
  let now = 0;
  const kept = new ShortLivedCache<string>(1000, 100, () => now);
  const { begun, read } = reads<string>();
  const first = kept.get('k', read);
  now = 900; // a slow read: it began at 0
  begun[0]!.finish('v1');
  assert.is(await first, 'v1');
  now = 1000;
  void kept.get('k', read);
  assert.is(begun.length, 2, 'kept from when its read began, not from when it ended');
  now = 2100;
  void kept.get('k', read);
  assert.is(begun.length, 3, 'a read begun ttlMs ago is not joined');
});

t('nothing found keeps nothing, and a drop forgets what a read in flight would keep', async () => {
  let now = 0;
  const kept = new ShortLivedCache<string>(1000, 100, () => now);
  const { begun, read } = reads<string>();
  const unknown = kept.get('k', read);
  begun[0]!.finish(null);
  assert.is(await unknown, null);
  void kept.get('k', read);
  assert.is(begun.length, 2, 'an unknown key is read again');
  kept.drop();
  const after = kept.get('k', read);
  assert.is(begun.length, 3, 'a caller after the drop does not join the read begun before it');
  begun[2]!.finish('new');
  assert.is(await after, 'new');
  begun[1]!.finish('old');
  await tick();
  now = 10;
  assert.is(await kept.get('k', read), 'new');
  assert.is(begun.length, 3);
});

t('a failed read ahead leaves the value until its time is up, then the next caller sees the failure', async () => {
  const { clock, kept, begun, read } = await keptV1();
  clock.now = 700;
  assert.is(await kept.get('k', read), 'v1');
  begun[1]!.fail(new Error('database gone'));
  await tick();
  clock.now = 900;
  assert.is(await kept.get('k', read), 'v1');
  clock.now = 1000;
  const failed = kept.get('k', read).then(
    () => 'answered',
    (e: Error) => e.message,
  );
  begun[begun.length - 1]!.fail(new Error('database still gone'));
  assert.is(await failed, 'database still gone');
});

t.run();
