import type { AdmitResult } from '../../runs/admit-runs.ts';

/**
 * When the embedded engine runs admission rounds (src/runs/admit-runs.ts): one at a time, the requests
 * that come meanwhile coalesced into one more round, and none while the queue is known to hold nothing
 * admissible (no run accepted here since a round found the queue clean; other processes' runs are found
 * by the engine's sweep, which forces a round).
 */
export interface AdmissionPumpOptions {
  /** One round; `expireQueued`: fail the runs that waited too long first. */
  round: (expireQueued: boolean) => Promise<AdmitResult>;
  /** What a round admitted (the engine starts their drivers). */
  admitted: (r: AdmitResult) => void;
  /** Whether rounds may run (the engine is running). */
  running: () => boolean;
  failed: (err: unknown) => void;
}

export class AdmissionPump {
  readonly #o: AdmissionPumpOptions;
  #admitting: Promise<void> | null = null;
  #again = false;
  #freedMeanwhile = false;
  /** Bumped whenever a run may have joined the queue; rounds are skipped while the queue is known clean. */
  #epoch = 1;
  #cleanEpoch = 0;
  /** Queue timeouts are checked on start and on every sweep, not on every round. */
  #expireDue = true;

  constructor(o: AdmissionPumpOptions) {
    this.#o = o;
  }

  /**
   * Whether the queue is known to hold nothing admissible: no run accepted here since a round found it
   * clean (runs queued by other processes are found by the sweep's forced round).
   */
  get knownClean(): boolean {
    return this.#cleanEpoch === this.#epoch;
  }

  /** The round in flight (stop waits for it), or null. */
  get inFlight(): Promise<void> | null {
    return this.#admitting;
  }

  /** A run was accepted here: it may be admissible. */
  accepted(): void {
    this.#epoch++;
    this.pump();
  }

  /** Start and sweep: a round whatever the queue is known to hold (other processes' runs, queue timeouts). */
  force(): void {
    this.#epoch++;
    this.#expireDue = true;
    this.pump();
  }

  /**
   * Runs a round now, or once more after the one in progress. `freed` (a run ended): during a round,
   * another is needed only if that round left runs waiting; one that took every run it saw needs none.
   */
  pump(freed = false): void {
    if (!this.#o.running()) return;
    if (this.knownClean) return; // nothing can be waiting
    if (this.#admitting) {
      if (freed) this.#freedMeanwhile = true;
      else this.#again = true;
      return;
    }
    this.#admitting = (async () => {
      do {
        this.#again = false;
        this.#freedMeanwhile = false;
        const epoch = this.#epoch;
        const expireQueued = this.#expireDue;
        this.#expireDue = false;
        const r = await this.#o.round(expireQueued);
        if (!r.more) this.#cleanEpoch = epoch;
        else if (this.#freedMeanwhile) this.#again = true;
        this.#o.admitted(r);
      } while (this.#again && this.#o.running());
    })()
      .catch((err: unknown) => this.#o.failed(err))
      .finally(() => {
        this.#admitting = null;
        if (this.#again) this.pump();
      });
  }
}
