import { freshDatabase } from '../measure.ts';
import { facts, notes, profiles, rows } from '../results.ts';
import { CAPACITY, DURATION, env, log, PROFILE, TEMPORAL, USERS, WARMUP } from '../settings.ts';
import { temporalBench } from '../temporal.ts';

// Part 5 of `npm run bench` (bench/run.ts): Temporal, measured by bench/temporal.ts.

export async function onTemporal(): Promise<void> {
  if ('skip' in TEMPORAL) {
    log(`temporal: skipped — ${TEMPORAL.skip}`);
    notes.push(`Temporal NOT MEASURED: ${TEMPORAL.skip}.`);
    return;
  }
  try {
    const r = await temporalBench({
      target: TEMPORAL,
      namespace: env.TEMPORAL_NAMESPACE || 'default',
      duration: DURATION,
      // Clients start spread over this (at least 3 s), so executions that take seconds do not stay in one wave.
      warmup: Math.max(WARMUP, 3),
      users: USERS,
      capacity: CAPACITY,
      profile: PROFILE,
      database: freshDatabase,
      log,
    });
    rows.push(...r.rows);
    notes.push(...r.notes);
    Object.assign(facts, r.facts);
    if (r.profile) profiles.push(r.profile);
  } catch (err) {
    notes.push(`Temporal NOT MEASURED: ${err instanceof Error ? err.message : String(err)}`);
    rows.push({
      group: 'Temporal',
      name: '3-step runs on ENGINE=temporal',
      clients: String(USERS),
      value: 'not measured',
      baseline: '—',
      ratio: '—',
      target: '≥ 80 % of floor',
      verdict: 'MISS',
    });
  }
}
