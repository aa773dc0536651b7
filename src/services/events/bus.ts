import { EventEmitter } from 'node:events';
import type { RunEventBus, RunEventListener } from '../../runs/run-event-bus.ts';
import type { PublicRunEvent } from '../../runs/run-views.ts';

/** The bus of one process (src/runs/run-event-bus.ts says what a bus promises); pg-bus.ts spans processes. */
export type { RunEventBus };

export class InProcessRunEventBus implements RunEventBus {
  readonly #emitter = new EventEmitter();

  constructor() {
    // One listener per open stream; 10 000 streams on one run is a legitimate load, not a leak.
    this.#emitter.setMaxListeners(0);
  }

  publish(runId: string, lastSequence: number, events?: readonly PublicRunEvent[]): void {
    this.#emitter.emit(runId, lastSequence, events);
  }

  subscribe(runId: string, listener: RunEventListener): () => void {
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
