import { query } from '../db/statement.ts';
import type { Deps } from '../runs/deps.ts';
import { READINESS_CHECK } from '../sql/readiness.ts';
import { sendJson } from './respond.ts';
import type { HttpServer } from './server.ts';

/** Unauthenticated liveness and readiness, at the server root (docs/design/configuration.md). */
export function mountHealth(http: HttpServer, deps: Deps, accepting: () => boolean = () => true): void {
  http.mount('/healthz', (_req, res) => sendJson(res, 200, { status: 'ok' }));
  http.mount('/readyz', async (_req, res) => {
    // Shutting down: not ready, whatever the checks would say (a load balancer stops sending here).
    if (!accepting()) return sendJson(res, 503, { status: 'draining', checks: { database: false, engine: false } });
    const checks = { database: false, engine: false };
    try {
      await query(deps.orm.em.fork(), READINESS_CHECK, []);
      checks.database = true;
    } catch (err) {
      deps.log.warn({ err }, 'readiness: database unreachable');
    }
    try {
      checks.engine = await deps.engine.ready();
    } catch (err) {
      deps.log.warn({ err }, 'readiness: engine unreachable');
    }
    const ok = checks.database && checks.engine;
    sendJson(res, ok ? 200 : 503, { status: ok ? 'ready' : 'unavailable', checks });
  });
}
