import { EventEmitter } from 'node:events';

/**
 * Tells live readers (SSE, GraphQL subscriptions) that a run's log grew. It carries only the run id and
 * its newest sequence: readers re-read the log from their own cursor, so a missed or duplicated
 * notification can delay an event but never lose or repeat one.
 */
export interface RunEventBus {
  publish(runId: string, lastSequence: number): void;
  subscribe(runId: string, listener: (lastSequence: number) => void): () => void;
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

  async close(): Promise<void> {
    this.#emitter.removeAllListeners();
  }
}
