import { temporalTarget } from './temporal.ts';
import { BENCH_KEY } from './shared.ts';

/** The settings of `npm run bench` from its environment (described in bench/run.ts) and the helpers every part uses. */

export const env = process.env;
export const num = (name: string, dflt: number) => {
  const v = env[name];
  if (v === undefined || v === '') return dflt;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number`);
  return n;
};
export const DURATION = num('BENCH_DURATION', 5);
export const WARMUP = num('BENCH_WARMUP', 1);
export const STREAMS = Math.round(num('BENCH_STREAMS', 10_000));
export const HOT = Math.min(STREAMS, Math.round(num('BENCH_HOT_STREAMS', 1000)));
export const CAPACITY = Math.round(num('RUN_CAPACITY', 64));
/** End to end on one account, 3-step runs through the public API, on a Postgres server (docs/performance.md). */
export const E2E_RUNS_PER_SEC = 1000;
export const E2E_TARGET = `≥ ${E2E_RUNS_PER_SEC} runs/s`;
export const USERS = Math.round(num('BENCH_USERS', CAPACITY));
export const ACCOUNTS = Math.round(num('BENCH_ACCOUNTS', 16));
export const PROFILE = env.BENCH_PROFILE !== '0';
export const TEMPORAL = temporalTarget(env);
export const ONLY = new Set(
  (env.BENCH_ONLY ?? `hotpath,accept,batch,flow,metrics,e2e,poll,list,bulk,streams,process${'skip' in TEMPORAL ? '' : ',temporal'}`)
    .split(',')
    .map((s) => s.trim()),
);
export const DATABASE_URL = env.DATABASE_URL || undefined;
export const DB_LOCAL = DATABASE_URL ? /@(127\.0\.0\.1|localhost|\[::1\])[:/]/.test(DATABASE_URL) || !/@/.test(DATABASE_URL) : true;
export const LIVE_EVENTS = 5;
/** Runs executing at once, a stream each, in the streams part's live-delivery step. */
export const LIVE_RUNS = Math.round(num('BENCH_LIVE_RUNS', 2000));

export const HEADERS = { authorization: `Bearer ${BENCH_KEY}`, 'content-type': 'application/json' };
export const runBody = (workflow: string) => JSON.stringify({ workflow, inputs: { name: 'Ada' } });
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const log = (...a: unknown[]) => console.error('·', ...a);
