import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Context } from 'openapi-backend';
import type { Principal } from '../../domain/principal.ts';
import type { Deps } from '../../runs/deps.ts';
import type { RateLimiter } from '../../runs/rate-limiter.ts';
import type { RequestContext } from '../server.ts';
import type { RequestBodies } from '../request-bodies.ts';
import type { HeartbeatTicker } from './heartbeat-ticker.ts';
import type { StreamSlots } from '../../runs/stream-slots.ts';

/** What a REST operation handler is given (src/http/rest/handlers.ts), built per request by rest-adapter.ts. */
export interface RestCall {
  req: IncomingMessage;
  res: ServerResponse;
  ctx: RequestContext;
  api: Context;
  deps: Deps;
  limiter: RateLimiter;
  /** Open SSE streams per API key, across the deployment (MAX_STREAMS_PER_KEY). */
  streams: StreamSlots;
  /** Idle heartbeats of the open SSE streams. */
  heartbeats: HeartbeatTicker;
  /** Request bodies on their way: in time, a bounded number per key (src/http/request-bodies.ts). */
  bodies: RequestBodies;
  principal: Principal;
}

export type RestHandler = (call: RestCall) => Promise<void>;

export function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}
