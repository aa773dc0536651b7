import { Agent, request, type ClientRequest } from 'node:http';
import { heapUsedBytes, rssBytes, type Started } from '../production.ts';
import { sleep } from '../settings.ts';

// A step of the process part (bench/parts/process.ts): what open SSE streams cost the production process.

/** The demo catalog's "Haiku (bring your key)": without a key the run waits for credentials for a day. */
const WAITING_WORKFLOW = '00000000-0000-4000-8000-00000000f003';
const DEMO = { authorization: 'Bearer wr_demo_key', 'content-type': 'application/json' };

export interface StreamCost {
  /** RSS and heap used (as /metrics reports it, no GC) added per open stream, second burst. */
  rssKiB: number;
  heapKiB: number;
  /** RSS per stream of the first burst, which also grows the heap's new space for good. */
  firstBurstRssKiB: number;
}

/**
 * `count` real SSE clients on loopback follow one waiting run (the process must run with
 * MAX_STREAMS_PER_KEY=0). They open, close, and open again: the first burst also grows what a busy
 * process keeps committed (RSS stays there after they close), the second shows what the open streams
 * themselves hold.
 */
export async function streamCost(s: Started, count: number): Promise<StreamCost> {
  const posted = await fetch(`${s.url}/v1/runs`, {
    method: 'POST',
    headers: DEMO,
    body: JSON.stringify({ workflow: WAITING_WORKFLOW, inputs: { topic: 'rain' } }),
  });
  if (posted.status !== 202) throw new Error(`POST /runs answered ${posted.status}: ${await posted.text()}`);
  const { run } = (await posted.json()) as { run: { id: string } };
  const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
  const measure = async () => {
    await sleep(1000);
    return { rss: rssBytes(s.proc.pid!), heap: await heapUsedBytes(s.url) };
  };
  const openAll = () =>
    new Promise<ClientRequest[]>((resolve, reject) => {
      const clients: ClientRequest[] = [];
      let opened = 0;
      for (let i = 0; i < count; i++) {
        const client = request(`${s.url}/v1/runs/${run.id}/stream`, { headers: DEMO, agent }, (res) => {
          if (res.statusCode !== 200) reject(new Error(`stream answered ${res.statusCode}`));
          // The snapshot arrived: the stream is open.
          res.once('data', () => ++opened === count && resolve(clients));
          res.resume();
        });
        client.on('error', reject);
        client.end();
        clients.push(client);
      }
    });
  const m0 = await measure();
  const first = await openAll();
  const m1 = await measure();
  for (const c of first) c.destroy();
  const m2 = await measure();
  const second = await openAll();
  const m3 = await measure();
  for (const c of second) c.destroy();
  agent.destroy();
  const kib = (bytes: number) => bytes / count / 1024;
  return { rssKiB: kib(m3.rss - m2.rss), heapKiB: kib(m3.heap - m2.heap), firstBurstRssKiB: kib(m1.rss - m0.rss) };
}
