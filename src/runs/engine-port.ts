/**
 * The engine port: what the service layer needs from whichever engine drives runs. State transitions
 * that the API itself causes (acceptance, cancellation, supplied credentials) are committed to Postgres
 * by the services first; the engine is then told, so both engines see the same durable truth.
 */
export interface EnginePort {
  readonly name: 'embedded' | 'temporal';
  /** Start driving runs (resume non-terminal runs, admit queued ones, fire due timers). */
  start(): Promise<void>;
  /** Stop taking work and wait for in-flight steps to reach a durable point. */
  stop(): Promise<void>;
  /**
   * A run was accepted and committed (queued: the engine admits it in a round of its own; scheduled: it
   * enters the line at its start), or a scheduled run's start was moved: look at its start again.
   */
  runAccepted(runId: string): Promise<void>;
  /** The run was cancelled in the database: abort whatever still works on it. */
  runCancelled(runId: string): Promise<void>;
  /** Credentials were stored for a run suspended with wait_signal: resume it. */
  credentialsSupplied(runId: string): Promise<void>;
  /** For /readyz. */
  ready(): Promise<boolean>;
}

/** An engine that drives nothing: for tools and tests that only need the service layer. */
export class NullEngine implements EnginePort {
  readonly name = 'embedded' as const;
  readonly accepted: string[] = [];
  async start(): Promise<void> {}
  async stop(): Promise<void> {}
  async runAccepted(runId: string): Promise<void> {
    this.accepted.push(runId);
  }
  async runCancelled(): Promise<void> {}
  async credentialsSupplied(): Promise<void> {}
  async ready(): Promise<boolean> {
    return true;
  }
}
