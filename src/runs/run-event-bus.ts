import type { PublicRunEvent } from './run-views.ts';

/**
 * Tells live readers (SSE, GraphQL subscriptions) that a run's log grew: the run id and its newest
 * sequence, and within the process that wrote them the events themselves. A reader delivers carried
 * events only when they continue what it delivered; otherwise it re-reads the log from its own cursor,
 * so a missed or duplicated notification can delay an event but never lose or repeat one. A reader
 * subscribes first and then reads the log, so what was written before it subscribed needs no notification.
 */
export interface RunEventBus {
  /** After a commit: `events`, when given, are that commit's events, in order, ending at `lastSequence` (never sent to other processes). */
  publish(runId: string, lastSequence: number, events?: readonly PublicRunEvent[]): void;
  subscribe(runId: string, listener: RunEventListener): () => void;
  /**
   * After cancels committed: tells the other processes on the database, whose engines may be executing
   * the runs (this process's engine is told directly). Nothing to do within one process.
   */
  publishCancel(runIds: readonly string[]): void;
  /**
   * Across processes: when the bus would send a notification at once anyway (nothing waiting, its gap
   * over), a transaction about to commit may carry it instead, saving the bus its round trip. Returns
   * the channel to NOTIFY on (the gap starts now), or null: the bus notifies as usual. The caller then
   * reports what that transaction notified (notifiedBy) before it publishes those runs.
   */
  claimNotify?(): string | null;
  /** Runs (id → sequence) a committed transaction notified: their publish tells this process's readers only. */
  notifiedBy?(runs: ReadonlyMap<string, number>): void;
  /** Runs cancelled by other processes (see publishCancel); returns the unsubscribe. */
  onCancel(listener: (runId: string) => void): () => void;
  /**
   * Another process wrote run events (a bus across processes only): runs are in flight elsewhere, and
   * the embedded engine looks sooner at what its sweep would find (a lease that may run out).
   */
  onActivity?(listener: () => void): () => void;
  close(): Promise<void>;
}

export type RunEventListener = (lastSequence: number, events?: readonly PublicRunEvent[]) => void;

/** Items in one run-events notification: a NOTIFY payload holds 8000 bytes, and an item takes about 45. */
export const ITEMS_PER_NOTIFICATION = 150;

/**
 * The items of a run-events notification payload (`<run id>:<sequence>,…`, as the bus and the
 * settlements' NOTIFY write it), malformed ones skipped.
 */
export function* notificationItems(payload: string): Generator<[runId: string, sequence: number]> {
  for (const item of payload.split(',')) {
    const cut = item.lastIndexOf(':');
    if (cut <= 0) continue;
    const seq = Number(item.slice(cut + 1));
    if (Number.isInteger(seq)) yield [item.slice(0, cut), seq];
  }
}
