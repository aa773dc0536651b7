import { EventEmitter } from 'node:events';
import type { RunEventBus } from '../../runs/run-event-bus.ts';

/** The bus of one process (src/runs/run-event-bus.ts says what a bus promises); pg-bus.ts spans processes. */
export type { RunEventBus };

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
