import { readFile } from 'node:fs/promises';
import { loadConfig } from '../config/config.ts';
import { DataDirLockedError } from '../db/data-dir-lock.ts';
import { describeDb, migrate, openOrm } from '../db/orm.ts';
import { loadOrCreateKey, Sealer } from '../security/crypto.ts';
import { CatalogError, parseCatalog } from './parse-catalog.ts';
import { loadCatalog, type LoadReport } from './load-catalog.ts';

/**
 * `npm run catalog -- load FILE`   upserts FILE into the database the service uses (DATABASE_URL / DATA_DIR)
 * `npm run catalog -- check FILE`  validates FILE without touching any database
 * Exit code 1 with one line per problem when the file is invalid, and one line (nothing written) when an
 * embedded server holds DATA_DIR.
 */

const USAGE = 'usage: npm run catalog -- load FILE | check FILE';

async function main(): Promise<void> {
  const [command, file, ...rest] = process.argv.slice(2);
  if (!command || !file || rest.length || !['load', 'check'].includes(command)) {
    console.error(USAGE);
    process.exit(2);
  }
  const text = await readFile(file, 'utf8');
  const catalog = parseCatalog(text, file);
  if (command === 'check') {
    console.log(`${file}: valid (${catalog.accounts.length} accounts, ${catalog.workflows.length} workflows)`);
    return;
  }
  const config = loadConfig();
  const orm = await openOrm({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    preparedStatements: config.preparedStatements,
    lockAs: { role: 'npm run catalog' },
  }).catch((err: unknown) => {
    // A load written behind a running embedded server's back is lost (it keeps serving, and later
    // overwrites, what it has in memory): refuse, and say how to load the file instead.
    if (err instanceof DataDirLockedError) throw new Refused(refusal(err, file));
    throw err;
  });
  try {
    await migrate(orm);
    const sealer = new Sealer(loadOrCreateKey(config.encryptionKey, config.dataDir));
    const report = await loadCatalog(orm, catalog, { sealer });
    console.log(summary(report, describeDb({ databaseUrl: config.databaseUrl, dataDir: config.dataDir })));
  } finally {
    await orm.close(true);
  }
}

class Refused extends Error {}

function refusal(err: DataDirLockedError, file: string): string {
  const { pid, role, port } = err.owner;
  return (
    `not loaded: DATA_DIR ${err.dir} is in use by process ${pid} (${role}${port !== undefined ? ` on port ${port}` : ''}), and the embedded database ` +
    `takes one process at a time; stop it and run this again, or restart it with CATALOG_FILE=${file} (it loads the file at start)`
  );
}

function summary(r: LoadReport, db: string): string {
  const rows = (['accounts', 'apiKeys', 'providerKeys', 'webhooks', 'workflows', 'versions', 'purchases', 'bundles'] as const).map(
    (k) => `  ${k.padEnd(13)} ${r[k].created} created, ${r[k].updated} updated, ${r[k].unchanged} unchanged`,
  );
  return [
    `loaded ${r.source} into ${db}`,
    ...rows,
    `  pricing       ${r.pricingUpdated ? 'updated' : 'unchanged'} (stepUsd ${r.pricing.stepUsd}, ${Object.keys(r.pricing.models).length} models)`,
    `total: ${r.created} created, ${r.updated} updated, ${r.unchanged} unchanged`,
  ].join('\n');
}

main().catch((err) => {
  if (err instanceof CatalogError || err instanceof Refused) {
    console.error(err.message);
  } else console.error(err);
  process.exit(1);
});
