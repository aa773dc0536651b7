import type { Deps } from '../services/deps.ts';
import { createLoaders, type Loaders } from './loaders.ts';

/** What every resolver gets: the service dependencies and this request's loaders. */
export interface GraphqlContext {
  deps: Deps;
  loaders: Loaders;
  /** The HTTP request id, for logs. */
  requestId?: string;
}

export function createContext(deps: Deps, requestId?: string): GraphqlContext {
  return { deps, loaders: createLoaders(deps), requestId };
}
