import { migrate, openOrm, type Orm } from '../../src/db/orm.ts';

/**
 * One database per test process: embedded PGlite in memory by default, the server named by
 * DATABASE_URL when set (its public schema is dropped and rebuilt once, so point it at a test database).
 */

let shared: Promise<Orm> | undefined;

export function testDbOptions(): { databaseUrl?: string; dataDir?: string } {
  return process.env.DATABASE_URL ? { databaseUrl: process.env.DATABASE_URL } : { dataDir: 'memory://' };
}

export function testOrm(): Promise<Orm> {
  shared ??= (async () => {
    const orm = await openOrm(testDbOptions());
    if (process.env.DATABASE_URL) {
      await orm.em.fork().execute('drop schema if exists public cascade; create schema public');
    }
    await migrate(orm);
    return orm;
  })();
  return shared;
}

/** Empties every table (but the migrations log) so each suite starts from a known state. */
export async function resetDb(orm: Orm): Promise<void> {
  const em = orm.em.fork();
  const rows = await em.execute<{ tablename: string }[]>(`select tablename from pg_tables where schemaname = 'public' and tablename not like 'mikro_orm%'`);
  await em.execute(`truncate ${rows.map((r) => `"${r.tablename}"`).join(', ')} restart identity cascade`);
}

/** Closes the shared database at process exit (uvu runs every suite in one process). */
export async function closeTestOrm(): Promise<void> {
  if (shared) await (await shared).close(true);
  shared = undefined;
}

/** What insertWorkflow needs of an entity manager: MikroORM's `execute`, with `?` placeholders. */
interface Executes {
  execute(sql: string, params: unknown[]): Promise<unknown>;
}

/** The db tests' workflow: named `w`, listed publicly, run on the service's credentials, with one version `v1` (an empty graph). */
export interface TestWorkflow {
  id: string;
  ownerId: string;
  versionId: string;
  /** `free` unless given. */
  runModel?: 'free' | 'per_run';
  /** The version is the workflow's active one (else it has none). */
  active?: boolean;
}

/** Inserts the workflow and its version. */
export async function insertWorkflow(em: Executes, w: TestWorkflow): Promise<void> {
  await em.execute(
    `insert into workflows (id, owner_id, name, run_model, listing, credential_mode, active_version_id) values (?, ?, 'w', ?, 'public', 'service_hosted', ?)`,
    [w.id, w.ownerId, w.runModel ?? 'free', w.active ? w.versionId : null],
  );
  await em.execute(`insert into workflow_versions (id, workflow_id, label, graph, graph_hash) values (?, ?, 'v1', '{"nodes":[]}', ?)`, [
    w.versionId,
    w.id,
    'x'.repeat(64),
  ]);
}
