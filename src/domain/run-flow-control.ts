import { forbidden, invalidRequest } from './errors.ts';
import { countCharacters, isStorableText } from './json-limits.ts';

/**
 * A run's place in the queue's flow control (docs/design/flow-control.md): its priority and its
 * caller's concurrency key with that key's bound, as POST /runs and each batch item give them.
 */

export const PRIORITIES = ['high', 'normal', 'low'] as const;
export type Priority = (typeof PRIORITIES)[number];

/** The class a priority is stored and ordered as (`runs.priority`: lower is admitted first). */
export const PRIORITY_CLASS: Record<Priority, number> = { high: 0, normal: 1, low: 2 };
export const priorityOfClass = (cls: number): Priority => PRIORITIES[cls] ?? 'normal';

export const MAX_CONCURRENCY_KEY = 128;
/** The largest bound per concurrency key a request or the catalog may give. */
export const MAX_CONCURRENCY_LIMIT = 1_000_000;

export interface RunFlowControl {
  priority: Priority;
  /** The caller's own customer or tenant, or null: the run is a flow of its own. */
  concurrencyKey: string | null;
  /** Runs of the key that may be in flight at once, or null: no bound. */
  concurrencyLimit: number | null;
}

export const NORMAL_FLOW: RunFlowControl = { priority: 'normal', concurrencyKey: null, concurrencyLimit: null };

/** What the API key allows (the catalog's `highPriority` and `maxConcurrentPerConcurrencyKey`). */
export interface FlowAllowance {
  highPriority: boolean;
  maxConcurrentPerConcurrencyKey: number | null;
}

/**
 * The flow control of a request body's `priority`, `concurrencyKey` and `maxConcurrentPerConcurrencyKey`,
 * checked against the key: 400 `invalid_request` for a malformed field or a bound above the key's, 403
 * `forbidden` for `high` on a key the catalog does not allow it.
 */
export function checkFlowControl(body: Record<string, unknown>, key: FlowAllowance): RunFlowControl {
  const { priority = 'normal', concurrencyKey, maxConcurrentPerConcurrencyKey: asked } = body;
  if (typeof priority !== 'string' || !(PRIORITIES as readonly string[]).includes(priority)) {
    throw invalidRequest(`"priority" must be one of: ${PRIORITIES.join(', ')}`);
  }
  if (priority === 'high' && !key.highPriority) throw forbidden('this API key may not start runs of high priority');
  if (concurrencyKey !== undefined) {
    if (typeof concurrencyKey !== 'string' || concurrencyKey.length === 0 || countCharacters(concurrencyKey) > MAX_CONCURRENCY_KEY) {
      throw invalidRequest(`"concurrencyKey" must be a string of 1 to ${MAX_CONCURRENCY_KEY} characters`);
    }
    if (!isStorableText(concurrencyKey)) throw invalidRequest('"concurrencyKey" must not contain NUL characters or unpaired UTF-16 surrogates');
  }
  if (asked !== undefined) {
    if (concurrencyKey === undefined) throw invalidRequest('"maxConcurrentPerConcurrencyKey" needs a "concurrencyKey"');
    if (typeof asked !== 'number' || !Number.isInteger(asked) || asked < 1 || asked > MAX_CONCURRENCY_LIMIT) {
      throw invalidRequest(`"maxConcurrentPerConcurrencyKey" must be an integer from 1 to ${MAX_CONCURRENCY_LIMIT}`);
    }
    const most = key.maxConcurrentPerConcurrencyKey;
    if (most !== null && asked > most) {
      throw invalidRequest(`"maxConcurrentPerConcurrencyKey" may lower this API key's bound of ${most}, never raise it`);
    }
  }
  return {
    priority: priority as Priority,
    concurrencyKey: concurrencyKey ?? null,
    concurrencyLimit: concurrencyKey === undefined ? null : (asked ?? key.maxConcurrentPerConcurrencyKey),
  };
}
