import { createApp } from './app.ts';
import { ConfigError, DEMO_CATALOG_FILE, loadConfigOrExit } from './config/config.ts';
import { DataDirLockedError } from './db/data-dir-lock.ts';
import { createLogger } from './logger.ts';
import { startTracing, stopTracing } from './observability/tracing.ts';

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const log = createLogger(config.logLevel);
  await startTracing(log); // only when an OTEL_EXPORTER_OTLP_*ENDPOINT is set (docs/tracing.md)
  const app = await createApp({ config, log });
  const url = await app.listen();

  // Printed plainly (not only as JSON) because a newcomer reads this first.
  const lines = [`workflow run API listening on ${url}  (REST ${url}/v1, GraphQL ${url}/graphql)`];
  if (config.internalApiTokenGenerated) lines.push(`internal GraphQL token (generated, set INTERNAL_API_TOKEN to fix it): ${config.internalApiToken}`);
  if (config.catalogFile === DEMO_CATALOG_FILE) lines.push(`demo API key: wr_demo_key   try: curl -H 'Authorization: Bearer wr_demo_key' ${url}/v1/workflows`);
  process.stdout.write(lines.join('\n') + '\n');

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    // The drain bounds itself by the grace (src/drain.ts); this is for a close that hangs past it.
    const force = setTimeout(() => {
      log.error({ graceMs: config.shutdownGraceMs }, 'shutdown did not finish; exiting');
      process.exit(1);
    }, config.shutdownGraceMs + 5_000);
    force.unref();
    app
      .close()
      .then(stopTracing)
      .then(
        () => {
          log.info({ signal }, 'stopped');
          process.exit(0);
        },
        (err) => {
          log.error({ err }, 'shutdown failed');
          process.exit(1);
        },
      );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((err) => {
  // A configuration that cannot work (Temporal unreachable, namespace missing, port taken, DATA_DIR held
  // by another process, …) is one clear line.
  if (err instanceof ConfigError || err instanceof DataDirLockedError) {
    console.error(err.message);
    process.exit(2);
  }
  console.error(err);
  process.exit(1);
});
