import { createServer } from 'node:net';
import { ConfigError } from '../config/config.ts';

/**
 * Whether PORT can be bound is known in a millisecond; finding out after migrations and the catalog load
 * (as a raw EADDRINUSE stack trace) is what a newcomer must not see. The real bind comes later, so a port
 * taken in between still fails, through listenError below.
 */
export async function assertPortFree(port: number, host: string): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (err) => reject(listenError(err, port, host)));
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve()));
  });
}

/** One line that says what to do, for any error binding the HTTP port. */
export function listenError(err: NodeJS.ErrnoException, port: number, host: string, variable = 'PORT'): ConfigError {
  const where = `${host}:${port}`;
  if (err.code === 'EADDRINUSE') {
    return new ConfigError(
      `cannot listen on ${where}: the port is already in use (by another server, perhaps another npm start); stop it or set ${variable} to a free port`,
    );
  }
  if (err.code === 'EACCES') {
    return new ConfigError(`cannot listen on ${where}: permission denied (ports below 1024 need privileges); set ${variable} to a port above 1023`);
  }
  if (err.code === 'EADDRNOTAVAIL' || err.code === 'ENOTFOUND') {
    return new ConfigError(`cannot listen on ${where}: HOST is not an address of this machine; set HOST (for example 127.0.0.1 or 0.0.0.0)`);
  }
  return new ConfigError(`cannot listen on ${where}: ${err.code ?? err.message}`);
}
