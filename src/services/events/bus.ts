import { EventEmitter } from 'node:events';

/**
 * Tells live readers (SSE, GraphQL subscriptions) that a run's log grew. It carries only the run id and
 * its newest sequence: readers re-read the log from their own cursor, so a missed or duplicated
 * notification can delay an event but never lose or repeat one.
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

export class InProcessRunEventBus implements RunEventBus {
  readonly #emitter = new EventEmitter();

  constructor() {
    // One listener per open stream; 10 000 streams on one run is a legitimate load, not a leak.
    this.#emitter.setMaxListeners(0);
  }

  publish(runId: string, lastSequence: number): void {
    this.#emitter.emit(runId, lastSequence);
  }

  subscribe(runId: string, listener: (lastSequence: number) => void): () => void {
    this.#emitter.on(runId, listener);
    return () => this.#emitter.off(runId, listener);
  }

  publishCancel(): void {}

  onCancel(): () => void {
    return () => undefined;
  }

  async close(): Promise<void> {
    this.#emitter.removeAllListeners();
  }
}
