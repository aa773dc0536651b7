import type { Deps } from '../services/deps.ts';
import { sendJson } from './respond.ts';
import type { HttpServer } from './server.ts';

/** Unauthenticated liveness and readiness, at the server root (docs/design/configuration.md). */
export function mountHealth(http: HttpServer, deps: Deps): void {
  http.mount('/healthz', (_req, res) => sendJson(res, 200, { status: 'ok' }));
  http.mount('/readyz', async (_req, res) => {
    const checks = { database: false, engine: false };
    try {
      await deps.orm.em.fork().execute('select 1');
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
