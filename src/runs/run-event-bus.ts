/**
 * Tells live readers (SSE, GraphQL subscriptions) that a run's log grew. It carries only the run id and
 * its newest sequence: readers re-read the log from their own cursor, so a missed or duplicated
 * notification can delay an event but never lose or repeat one.
 */
export interface RunEventBus {
  /**
   * `notified`: the statement that grew the log also sent the notification to the other processes
   * (pg_notify on `notifyChannel`, delivered with its commit), so only this process's readers are told here.
   */
  publish(runId: string, lastSequence: number, notified?: boolean): void;
  /**
   * The channel a statement that grows a run's log may NOTIFY itself (`pg_notify(channel, '<runId>:<seq>')`),
   * saving the bus a round trip; null when the bus does not span processes.
   */
  readonly notifyChannel: string | null;
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
