import { readFile } from 'node:fs/promises';
import { loadConfig } from '../config/config.ts';
import { describeDb, migrate, openOrm } from '../db/orm.ts';
import { loadOrCreateKey, Sealer } from '../security/crypto.ts';
import { CatalogError, loadCatalog, parseCatalog, type LoadReport } from './load-catalog.ts';

/**
 * `npm run catalog -- load FILE`   upserts FILE into the database the service uses (DATABASE_URL / DATA_DIR)
 * `npm run catalog -- check FILE`  validates FILE without touching any database
 * Exit code 1 with one line per problem when the file is invalid.
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
  const orm = await openOrm({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, preparedStatements: config.preparedStatements });
  try {
    await migrate(orm);
    const sealer = new Sealer(loadOrCreateKey(config.encryptionKey, config.dataDir));
    const report = await loadCatalog(orm, catalog, { sealer });
    console.log(summary(report, describeDb({ databaseUrl: config.databaseUrl, dataDir: config.dataDir })));
  } finally {
    await orm.close(true);
  }
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
  if (err instanceof CatalogError) {
    console.error(err.message);
  } else console.error(err);
  process.exit(1);
});
