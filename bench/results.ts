import type { CpuSplit } from './machine.ts';
import type { ProfileSummary, Row, SqlStats, StepStats } from './shared.ts';

/** What the parts of `npm run bench` collect and main (bench/run.ts) prints and writes as JSON. */

export interface StepReport {
  name: string;
  ops: number;
  server: StepStats;
  cpu: CpuSplit;
  waits: string;
  /** Postgres commits, WAL syncs and WAL bytes per operation. */
  db: string;
}

export const rows: Row[] = [];
export const steps: StepReport[] = [];
export const kinds: { name: string; per: number; sql: SqlStats }[] = [];
export const profiles: { name: string; summary: ProfileSummary; file: string; sql: SqlStats }[] = [];
export const notes: string[] = [];
export const facts: Record<string, number> = {};

/** Requests the load generator cut off when a step ended (closeChild adds them up; main notes them). */
export const aborted = { requests: 0 };
