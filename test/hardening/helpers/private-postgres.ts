import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/**
 * A throwaway PostgreSQL cluster for fault tests that must stop and start the database server: its own
 * data directory under the OS temp dir, its own port on 127.0.0.1 and its own socket directory, so the
 * shared server on 5432 (which CI's Postgres pass uses) is never touched.
 *
 * `initdb` refuses to run as root; as root the cluster is created and run as the `postgres` system
 * user. `privatePostgres()` returns the reason instead of a cluster when that cannot work here (no
 * server binaries, root without a `postgres` user), so the caller can print why it skips.
 */

export interface PrivatePostgres {
  port: number;
  /** `postgres://postgres@127.0.0.1:<port>/<db>` */
  url(db?: string): string;
  /** Creates a database (psql-free: through the server's own `postgres` database). */
  createDb(name: string): Promise<void>;
  /** `pg_ctl stop -m <mode>`: `fast` ends sessions cleanly, `immediate` is a crash (recovery at the next start). */
  stop(mode: 'fast' | 'immediate'): Promise<void>;
  /** `pg_ctl start -w` on the same port and data directory. */
  start(): Promise<void>;
  /** Stops the server if it runs and removes every file. Safe to call twice. */
  destroy(): Promise<void>;
  /** The server log so far (for failure messages). */
  log(): string;
}

function run(cmd: string, args: string[], opts: { uid?: number; gid?: number; timeoutMs?: number } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      cmd,
      args,
      {
        uid: opts.uid,
        gid: opts.gid,
        timeout: opts.timeoutMs ?? 60_000,
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C', LC_ALL: 'C' },
        cwd: tmpdir(),
      },
      (err, stdout, stderr) => (err ? reject(new Error(`${cmd} ${args.join(' ')}: ${err.message}\n${stdout}${stderr}`)) : resolve(stdout + stderr)),
    );
  });
}

/** The directory holding initdb, pg_ctl and postgres, or null. */
function findBinDir(): string | null {
  const candidates: string[] = [];
  for (const dir of (process.env.PATH ?? '').split(':')) if (dir) candidates.push(dir);
  if (existsSync('/usr/lib/postgresql')) {
    const versions = readdirSync('/usr/lib/postgresql')
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a));
    for (const v of versions) candidates.push(`/usr/lib/postgresql/${v}/bin`);
  }
  for (const dir of candidates) {
    if (['initdb', 'pg_ctl', 'postgres'].every((b) => existsSync(join(dir, b)))) return dir;
  }
  // PATH often has initdb/pg_ctl as links (Debian's /usr/local/bin) without `postgres` beside them.
  for (const dir of candidates) {
    const initdb = join(dir, 'initdb');
    if (!existsSync(initdb)) continue;
    const realDir = dirname(realpathSync(initdb));
    if (['initdb', 'pg_ctl', 'postgres'].every((b) => existsSync(join(realDir, b)))) return realDir;
  }
  return null;
}

/** uid/gid of a local user from /etc/passwd, or null. */
function lookupUser(name: string): { uid: number; gid: number } | null {
  try {
    for (const line of readFileSync('/etc/passwd', 'utf8').split('\n')) {
      const f = line.split(':');
      if (f[0] === name && f.length >= 4) return { uid: Number(f[2]), gid: Number(f[3]) };
    }
  } catch {
    /* no passwd file */
  }
  return null;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** Why no private cluster can be made on this machine, or null when one can. */
export function whyNoPrivatePostgres(): string | null {
  if (!findBinDir()) return 'no PostgreSQL server binaries (initdb, pg_ctl, postgres) on PATH or in /usr/lib/postgresql/*/bin';
  if (process.getuid?.() === 0 && !lookupUser('postgres'))
    return 'running as root (initdb refuses root) and there is no "postgres" user to run the private cluster as';
  return null;
}

/** Creates and starts a private cluster, or returns why it cannot be done on this machine. */
export async function privatePostgres(): Promise<PrivatePostgres | string> {
  const why = whyNoPrivatePostgres();
  if (why) return why;
  const bin = findBinDir()!;
  const owner = process.getuid?.() === 0 ? lookupUser('postgres')! : undefined;
  const dir = mkdtempSync(join(tmpdir(), 'wr-pg-'));
  if (owner) chownSync(dir, owner.uid, owner.gid);
  const data = join(dir, 'data');
  const logFile = join(dir, 'server.log');
  const as = owner ? { uid: owner.uid, gid: owner.gid } : {};
  let running = false;
  let destroyed = false;
  const port = await freePort();

  const start = async () => {
    await run(
      join(bin, 'pg_ctl'),
      [
        '-D',
        data,
        '-l',
        logFile,
        '-w',
        '-t',
        '60',
        // fsync=off: a process crash (stop -m immediate) keeps every write in the OS page cache, which is
        // what this cluster is for; only an OS crash would need fsync. synchronous_commit stays on, so a
        // commit the service saw is in the WAL before the server is killed.
        '-o',
        `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c shared_buffers=16MB -c max_connections=40`,
        'start',
      ],
      as,
    );
    running = true;
  };

  try {
    await run(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '--no-locale', '-E', 'UTF8', '--no-sync'], as);
    await start();
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }

  const self: PrivatePostgres = {
    port,
    url: (db = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${db}`,
    async createDb(name) {
      const pg = (await import('pg')).default;
      const client = new pg.Client({ connectionString: self.url('postgres') });
      await client.connect();
      try {
        await client.query(`create database "${name}"`);
      } finally {
        await client.end();
      }
    },
    async stop(mode) {
      await run(join(bin, 'pg_ctl'), ['-D', data, '-m', mode, '-w', '-t', '60', 'stop'], as);
      running = false;
    },
    start,
    async destroy() {
      if (destroyed) return;
      destroyed = true;
      if (running) await run(join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', '-t', '30', 'stop'], as).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
    log: () => {
      try {
        return readFileSync(logFile, 'utf8');
      } catch {
        return '';
      }
    },
  };
  return self;
}
