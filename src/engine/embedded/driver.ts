import type { StepEnd } from '../../domain/graph/run-driver.ts';
import type { StepOutcome } from '../../runs/record-step.ts';
import type { RunState } from '../../runs/run-state.ts';

/** One run's async driver in the embedded engine (embedded-engine.ts), and how it waits. */

export type LoopOutcome = { kind: 'done' } | { kind: 'park'; until: number | null } | { kind: 'stopped' } | { kind: 'lost' };

export interface Driver {
  runId: string;
  abort: AbortController;
  /** Resolves the driver's current wait (poke, stop, cancel). */
  wake: (() => void) | null;
  /** Something happened (credentials, timer) while the driver was busy: look at the database again. */
  poked: boolean;
  stopRequested: boolean;
  /** Lease lost to another instance (or the run ended under us): stop without writing. */
  lost: boolean;
  /** Just admitted: the state admission returned (saves reading it). */
  admitted: RunState | null;
  done: Promise<void>;
}

export type StepDone = StepEnd<StepOutcome>;

export const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** Waits `ms`, or less when the driver is woken (stop, cancel, poke). */
export async function pauseDriver(d: Driver, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await new Promise<void>((resolve) => {
    d.wake = resolve;
    timer = setTimeout(resolve, ms);
  });
  clearTimeout(timer);
  d.wake = null;
}

/** The next finished step, or null when the timer ran out or the driver was woken. */
export async function nextStepDone(d: Driver, inflight: Map<string, Promise<StepDone>>, ms: number | null): Promise<StepDone | null> {
  let timer: NodeJS.Timeout | undefined;
  const wakeup = new Promise<null>((resolve) => {
    d.wake = () => resolve(null);
    if (ms !== null) timer = setTimeout(() => resolve(null), Math.min(ms + 1, MAX_TIMEOUT_MS));
  });
  try {
    return await Promise.race([...inflight.values(), wakeup]);
  } finally {
    clearTimeout(timer);
    d.wake = null;
  }
}
