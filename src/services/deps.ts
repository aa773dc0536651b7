import type { Config } from '../config/config.ts';
import type { Orm, Em } from '../db/orm.ts';
import type { EnginePort } from '../engine/port.ts';
import type { Logger } from '../logger.ts';
import type { Sealer } from '../security/crypto.ts';
import type { RunEventBus } from './events/bus.ts';

/** Everything a service operation may touch. Adapters (REST, GraphQL, engines) hold one of these. */
export interface Deps {
  config: Config;
  orm: Orm;
  log: Logger;
  sealer: Sealer;
  bus: RunEventBus;
  engine: EnginePort;
  /** Absolute prefix of URLs in responses: PUBLIC_BASE_URL or http://localhost:PORT/v1. */
  baseUrl: () => string;
  /** Wakes the webhook dispatcher after a terminal transition commits (it also polls on its own). */
  webhooks?: { notify(): void };
}

export function fork(deps: Pick<Deps, 'orm'>): Em {
  return deps.orm.em.fork() as unknown as Em;
}
