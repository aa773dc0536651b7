import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { loadConfig } from '../../src/config/config.ts';
import type { Orm } from '../../src/db/orm.ts';
import type { RunsDeps } from '../../src/runs/deps.ts';
import { Sealer } from '../../src/security/crypto.ts';
import { InProcessRunEventBus } from '../../src/services/events/bus.ts';

/** What the runs module needs to drive runs on `orm` in a test: no catalog, silent logs, a fresh sealer and an in-process bus. */
export function testRunsDeps(orm: Orm): RunsDeps {
  return {
    config: loadConfig({ CATALOG_FILE: 'none', LOG_LEVEL: 'silent' }),
    orm,
    log: pino({ level: 'silent' }),
    sealer: new Sealer(randomBytes(32)),
    bus: new InProcessRunEventBus(),
    baseUrl: () => 'http://localhost/v1',
  };
}
