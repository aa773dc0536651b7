/**
 * Tells live readers (SSE, GraphQL subscriptions) that a run's log grew. It carries only the run id and
 * its newest sequence: readers re-read the log from their own cursor, so a missed or duplicated
 * notification can delay an event but never lose or repeat one. A reader subscribes first and then
 * reads the log, so what was written before it subscribed needs no notification.
 */
export interface RunEventBus {
  publish(runId: string, lastSequence: number): void;
  subscribe(runId: string, listener: (lastSequence: number) => void): () => void;
  /**
   * After a cancel committed: tells the other processes on the database, whose engines may be executing
   * the run (this process's engine is told directly). Nothing to do within one process.
   */
  publishCancel(runId: string): void;
  /** Runs cancelled by other processes (see publishCancel); returns the unsubscribe. */
  onCancel(listener: (runId: string) => void): () => void;
  close(): Promise<void>;
}
