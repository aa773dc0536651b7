import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { MIGRATION_LOCK_KEY } from '../../src/db/orm.ts';
import { startService, type ServiceProcess } from '../helpers/service-process.ts';
import { countTemporal, temporalAddress } from '../helpers/temporal.ts';
import { waitFor } from '../helpers/wait-for.ts';

/**
 * API processes and Temporal workers started at the same moment on an empty Postgres database all come
 * up: the migrations run under an advisory lock (src/db/orm.ts), so one process migrates and the others
 * wait for it instead of creating the same tables at once. The test database's public schema is
 * dropped before each start (MikroORM keeps its migrations log in `public`, so another schema would not
 * do); the processes leave it migrated, and the suites after this one empty its tables as usual.
 */

const databaseUrl = process.env.DATABASE_URL;
const address = databaseUrl ? temporalAddress('start together') : null;
if (!databaseUrl) console.log('  start together: needs DATABASE_URL (a Postgres server); SKIPPED');

async function withEmptyDatabase(fn: (env: Record<string, string>) => Promise<void>): Promise<void> {
  const admin = new pg.Client({ connectionString: databaseUrl });
  await admin.connect();
  const dataDir = mkdtempSync(join(tmpdir(), 'wr-start-together-'));
  try {
    await admin.query('drop schema if exists public cascade; create schema public');
    await fn({
      DATABASE_URL: databaseUrl!,
      DATA_DIR: dataDir,
      ENCRYPTION_KEY: randomBytes(32).toString('hex'),
      ENGINE: 'temporal',
      TEMPORAL_ADDRESS: address!,
      TEMPORAL_TASK_QUEUE: `start-together-${randomUUID()}`,
      LOG_LEVEL: 'info',
    });
  } finally {
    await admin.end();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

if (address) {
  test(
    'two API processes and a worker started at the same moment on an empty database all come up',
    countTemporal(async () => {
      await withEmptyDatabase(async (env) => {
        // Slow to come up on a busy machine (a worker bundles the workflow code first): minutes, not seconds.
        const upWithinMs = 240_000;
        const processes: ServiceProcess[] = [
          startService({ ...env, TEMPORAL_WORKER: 'off' }, { upWithinMs }),
          startService({ ...env, TEMPORAL_WORKER: 'off' }, { upWithinMs }),
          startService(env, { entry: 'src/worker.ts', ready: /temporal worker running/, upWithinMs }),
        ];
        try {
          const up = await Promise.allSettled(processes.map((p) => p.url));
          const failed = up.flatMap((r, i) => (r.status === 'rejected' ? [`process ${i}: ${(r.reason as Error).message.slice(0, 2000)}`] : []));
          assert.equal(failed, [], failed.join('\n'));
          // Exactly one of them applied the migrations; the others found the schema complete.
          const migrated = processes.filter((p) => /migrations applied/.test(p.output()));
          assert.is(migrated.length, 1, 'one process applied the migrations');
          const api = await processes[0]!.url;
          const list = await fetch(`${api}/v1/workflows`, { headers: { authorization: 'Bearer wr_demo_key' } });
          assert.is(list.status, 200);
        } finally {
          await Promise.all(processes.map((p) => p.stop()));
        }
      });
    }),
  );

  test(
    'a process waits for the migration lock another holds, then migrates',
    countTemporal(async () => {
      await withEmptyDatabase(async (env) => {
        const holder = new pg.Client({ connectionString: databaseUrl });
        await holder.connect();
        try {
          await holder.query('select pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
          const api = startService({ ...env, TEMPORAL_WORKER: 'off' }, { upWithinMs: 240_000 });
          try {
            await waitFor(
              'the process to wait for the migration lock',
              async () => {
                const waiting = await holder.query(`select 1 from pg_locks where locktype = 'advisory' and objid = $1 and not granted`, [MIGRATION_LOCK_KEY]);
                return waiting.rowCount === 1;
              },
              120_000,
            );
            assert.not.match(api.output(), 'migrations applied');
            await holder.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
            await api.url;
            assert.match(api.output(), 'migrations applied');
          } finally {
            await api.stop();
          }
        } finally {
          await holder.end();
        }
      });
    }),
  );
}

test.run();
