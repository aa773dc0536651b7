import { randomUUID } from 'node:crypto';
import { ApiError } from '../../domain/errors.ts';
import type { Orm } from '../../db/orm.ts';
import type { Logger } from '../../logger.ts';
import { prepared } from '../../db/prepared.ts';
import { requestRateLimited } from '../../observability/metrics.ts';

/**
 * Open-stream limits (MAX_STREAMS_PER_KEY): how many live streams one holder (an API key's SSE streams,
 * the internal token's GraphQL subscriptions) may keep open across the deployment. One over the limit
 * is refused with 429 `too_many_streams` before the stream starts (docs/design/rules.md, "Open
 * streams"). `rate_limited` stays reserved for POST /runs.
 *
 * On a Postgres server the counts are shared by every process (PostgresStreamSlots); embedded PGlite is
 * one process by construction and counts in memory.
 */

export interface StreamSlots {
  /** Takes a slot or throws 429 `too_many_streams`. The caller gives it back with `release`, once. */
  acquire(holder: string): Promise<void>;
  release(holder: string): void;
  /** Gives back every slot this process holds (shutdown). */
  close(): Promise<void>;
}

/** Holder of an API key's REST streams. */
export const keyHolder = (apiKeyId: string) => `key:${apiKeyId}`;

function refuse(limit: number): never {
  requestRateLimited('open_streams');
  throw new ApiError('too_many_streams', `this API key already has ${limit} open streams; close one before opening another`, { retryAfterSeconds: 5 });
}

/** MAX_STREAMS_PER_KEY=0: no limit. */
export class UnlimitedStreamSlots implements StreamSlots {
  async acquire(): Promise<void> {}
  release(): void {}
  async close(): Promise<void> {}
}

export class MemoryStreamSlots implements StreamSlots {
  readonly #open = new Map<string, number>();
  constructor(readonly limit: number) {}

  async acquire(holder: string): Promise<void> {
    const n = this.#open.get(holder) ?? 0;
    if (n >= this.limit) refuse(this.limit);
    this.#open.set(holder, n + 1);
  }

  release(holder: string): void {
    const left = (this.#open.get(holder) ?? 1) - 1;
    if (left > 0) this.#open.set(holder, left);
    else this.#open.delete(holder);
  }

  async close(): Promise<void> {
    this.#open.clear();
  }
}

/**
 * Counts in Postgres: a total per holder (`stream_slot_totals`, the row every process updates, so the
 * check and the count are one atomic step under its row lock) and what each process holds of it
 * (`stream_slot_leases`, with a lease this process renews). A process that dies without giving its
 * slots back (kill -9) stops renewing; any process then subtracts its expired leases from the totals.
 */
const ACQUIRE_SQL = prepared('acquire_stream_slot', `with t as (
  insert into stream_slot_totals as t (holder, open) values (?, 1)
  on conflict (holder) do update set open = t.open + 1 where t.open < ?
  returning holder)
insert into stream_slot_leases as l (holder, process_id, open, lease_until)
select holder, ?, 1, now() + make_interval(secs => ?) from t
on conflict (holder, process_id) do update set open = l.open + 1, lease_until = excluded.lease_until
returning open`);

/** The total first, then the lease: the same row order as ACQUIRE_SQL, so the two never deadlock. */
const RELEASE_SQL = prepared('release_stream_slot', `with t as (
  update stream_slot_totals set open = open - 1
   where holder = ? and open > 0
     and exists (select 1 from stream_slot_leases where holder = ? and process_id = ? and open > 0)
  returning holder)
update stream_slot_leases l set open = l.open - 1 from t where l.holder = t.holder and l.process_id = ?`);

/** Drops leases (expired ones, or this process's at shutdown) and takes their slots off the totals. */
const dropLeasesSql = (where: string) => `with dead as (delete from stream_slot_leases where ${where} returning holder, open)
update stream_slot_totals t set open = greatest(0, t.open - d.open)
  from (select holder, sum(open)::int as open from dead group by holder) d where t.holder = d.holder`;

export class PostgresStreamSlots implements StreamSlots {
  readonly processId = `streams-${randomUUID()}`;
  readonly #timer: NodeJS.Timeout;

  constructor(
    private readonly orm: Orm,
    readonly limit: number,
    private readonly log: Logger,
    private readonly leaseSeconds = 30,
  ) {
    this.#timer = setInterval(() => void this.#renew(), (leaseSeconds * 1000) / 3);
    this.#timer.unref();
  }

  async acquire(holder: string): Promise<void> {
    const rows = await this.#em().execute<{ open: number }[]>(ACQUIRE_SQL, [holder, this.limit, this.processId, this.leaseSeconds]);
    if (rows.length === 0) refuse(this.limit);
  }

  release(holder: string): void {
    this.#em()
      .execute(RELEASE_SQL, [holder, holder, this.processId, this.processId])
      .catch((err) => this.log.warn({ err }, 'could not give back a stream slot (its lease expires instead)'));
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.#em()
      .execute(dropLeasesSql('process_id = ?'), [this.processId])
      .catch((err) => this.log.warn({ err }, 'could not give back the stream slots (their leases expire instead)'));
  }

  async #renew(): Promise<void> {
    try {
      const em = this.#em();
      await em.execute(`update stream_slot_leases set lease_until = now() + make_interval(secs => ?) where process_id = ?`, [this.leaseSeconds, this.processId]);
      await em.execute(dropLeasesSql('lease_until < now()'));
    } catch (err) {
      this.log.warn({ err }, 'could not renew the stream slot leases');
    }
  }

  #em() {
    return this.orm.em.fork();
  }
}

/** The slots a service instance uses: in Postgres on a server, in memory on PGlite; none when limit is 0. */
export function createStreamSlots(opts: { orm: Orm; limit: number; shared: boolean; log: Logger }): StreamSlots {
  if (opts.limit === 0) return new UnlimitedStreamSlots();
  return opts.shared ? new PostgresStreamSlots(opts.orm, opts.limit, opts.log) : new MemoryStreamSlots(opts.limit);
}
