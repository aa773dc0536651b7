import { freezeGraph } from '../domain/graph/analysis.ts';
import type { WorkflowRow } from '../catalog/workflow-access.ts';

/**
 * POST /runs's workflow reads, kept per process for a short while by caller and workflow, so that a
 * request whose workflow was read recently goes to Postgres in one message (src/runs/start-run.ts).
 * A kept read is never trusted on its own: the acceptance writes nothing unless the workflow as the
 * caller sees it still has the read's view token (src/sql/workflows.ts), and a refusal decided from a
 * kept read is decided again from a fresh one. Only workflows the caller can see are kept. Bounded:
 * the least recently used read goes first (docs/architecture.md).
 */

export interface KeptRead {
  row: WorkflowRow;
  /** The view token the read returned, for the acceptance's fence. */
  token: string;
}

const MAX_ENTRIES = 4096;
const TTL_MS = 30_000;

export class WorkflowReadCache {
  readonly #entries = new Map<string, { at: number; read: KeptRead }>();
  /** Keys with a read ahead in flight (one at a time per key). */
  readonly #ahead = new Set<string>();
  /** Keys dropped while their read ahead was in flight: it keeps nothing (the workflow may have changed since). */
  readonly #cancelled = new Set<string>();

  constructor(
    readonly max = MAX_ENTRIES,
    readonly ttlMs = TTL_MS,
  ) {}

  get(accountId: string, workflowId: string, now = Date.now()): KeptRead | undefined {
    const key = `${accountId}:${workflowId}`;
    const e = this.#entries.get(key);
    if (!e) return undefined;
    this.#entries.delete(key);
    if (now - e.at >= this.ttlMs) return undefined;
    // Map order is insertion order: put back, it is the most recently used.
    this.#entries.set(key, e);
    return e.read;
  }

  /**
   * Begins `read` in the background when the kept read of this caller and workflow is past half its
   * time and no read ahead of it is in flight, so that a caller with steady traffic does not find it
   * expired (then every request in flight would read it again, each counting itself in its key's rate
   * window, one after another on its row). `read` counts nothing; what it finds is kept from when it began,
   * unless a newer read was kept or a read dropped meanwhile; a workflow it no longer finds visible is
   * dropped.
   */
  readAhead(accountId: string, workflowId: string, read: () => Promise<KeptRead | null>, now = Date.now()): void {
    const key = `${accountId}:${workflowId}`;
    const e = this.#entries.get(key);
    if (!e || now - e.at < this.ttlMs / 2 || this.#ahead.has(key)) return;
    this.#ahead.add(key);
    read()
      .then((found) => {
        const kept = this.#entries.get(key);
        if (this.#cancelled.has(key) || (kept && kept.at > now)) return;
        if (found) this.set(accountId, workflowId, found, now);
        else this.drop(accountId, workflowId);
      })
      // A failed read ahead changes nothing: the kept read expires and a request reads the workflow itself.
      .catch(() => undefined)
      .finally(() => {
        this.#ahead.delete(key);
        this.#cancelled.delete(key);
      });
  }

  set(accountId: string, workflowId: string, read: KeptRead, now = Date.now()): void {
    const key = `${accountId}:${workflowId}`;
    // Shared by the caller's requests from now on: nothing may edit it.
    const shown = read.row.shownVersion;
    if (shown) freezeGraph(shown.graph);
    this.#entries.delete(key);
    this.#entries.set(key, { at: now, read });
    while (this.#entries.size > this.max) this.#entries.delete(this.#entries.keys().next().value!);
  }

  drop(accountId: string, workflowId: string): void {
    const key = `${accountId}:${workflowId}`;
    if (this.#ahead.has(key)) this.#cancelled.add(key);
    this.#entries.delete(key);
  }
}

const caches = new WeakMap<object, WorkflowReadCache>();

/** The cache of the process's reads from one database (keyed by its ORM: tests run several apps in one process). */
export function workflowReadCache(orm: object): WorkflowReadCache {
  let c = caches.get(orm);
  if (!c) caches.set(orm, (c = new WorkflowReadCache()));
  return c;
}
