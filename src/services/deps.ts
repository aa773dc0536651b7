import type { EnginePort } from '../runs/engine-port.ts';
import type { RunsDeps } from '../runs/deps.ts';
import type { StreamSlots } from './streams/stream-slots.ts';

export { fork } from '../runs/deps.ts';

/** Everything a service operation may touch. Adapters (REST, GraphQL, engines) hold one of these. */
export interface Deps extends RunsDeps {
  engine: EnginePort;
  /** Open-stream slots (REST SSE, GraphQL subscriptions); set by the app, which mounts the adapters that use them. */
  streams?: StreamSlots;
}
