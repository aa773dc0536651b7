import type { Config } from '../config/config.ts';
import type { Em, Orm } from '../db/orm.ts';
import type { Logger } from '../logger.ts';
import type { Sealer } from '../security/crypto.ts';
import type { EnginePort } from './engine-port.ts';
import type { RunEventBus } from './run-event-bus.ts';
import type { StreamSlots } from './stream-slots.ts';

/**
 * What the runs module's operations touch: the database, the bus that tells live readers about new
 * events, the sealer for run secrets. No engine: the engines call the runs module, and the runs module
 * reaches an engine only through the port in `Deps`.
 */
export interface RunsDeps {
  config: Config;
  orm: Orm;
  log: Logger;
  sealer: Sealer;
  bus: RunEventBus;
  /** Absolute prefix of URLs in responses: PUBLIC_BASE_URL or http://localhost:PORT/v1. */
  baseUrl: () => string;
  /** Wakes the webhook dispatcher after a terminal transition commits (it also polls on its own). */
  webhooks?: { notify(): void };
}

/**
 * What the adapters (REST, GraphQL) hold and hand to the runs module and the services: the runs
 * module's dependencies and the engine to tell about accepted, cancelled and resumed runs.
 */
export interface Deps extends RunsDeps {
  engine: EnginePort;
  /** Open-stream slots (REST SSE, GraphQL subscriptions); set by the app, which mounts the adapters that use them. */
  streams?: StreamSlots;
}

export function fork(deps: Pick<RunsDeps, 'orm'>): Em {
  return deps.orm.em.fork();
}
