import type { Em } from '../db/orm.ts';
import { fork, type Deps } from '../runs/deps.ts';
import { createLoaders, type Loaders } from './loaders.ts';

/**
 * What every resolver gets: the service dependencies, this request's EntityManager (a fork, so its
 * identity map lives for one request) and the DataLoaders that read through it.
 */
export interface GraphqlContext {
  deps: Deps;
  em: Em;
  loaders: Loaders;
  /** The HTTP request id, for logs. */
  requestId?: string;
}

export function createContext(deps: Deps, requestId?: string): GraphqlContext {
  const em = fork(deps);
  return { deps, em, loaders: createLoaders(deps, em), requestId };
}
