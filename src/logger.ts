import pino, { type Logger } from 'pino';

export type { Logger };

/** Structured JSON logs. Anything that could carry a secret is redacted by path, as a second fence. */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'workflow-run-api' },
      redact: {
        paths: [
          'req.headers.authorization',
          'headers.authorization',
          'authorization',
          'apiKey',
          'secret',
          'password',
          '*.apiKey',
          '*.secret',
          '*.password',
          'inputs',
          '*.inputs',
        ],
        censor: '[redacted]',
      },
    },
    destination,
  );
}
