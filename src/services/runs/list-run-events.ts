import { ApiError, notFound } from '../../domain/errors.ts';
import { fork, type Deps } from '../deps.ts';
import { isUuid } from '../../domain/ids.ts';
import { findAccountRun, readEvents } from './run-views.ts';

export const EVENTS_PAGE_SIZE = 1000;

/** Parses an events cursor (`afterSequence` or `Last-Event-ID`): an integer ≥ 0, else invalid_cursor. */
export function parseCursor(raw: string | undefined, name = 'afterSequence'): number | undefined {
  if (raw === undefined) return undefined;
  const t = raw.trim();
  if (!/^(0|[1-9]\d{0,15})$/.test(t)) throw new ApiError('invalid_cursor', `${name} must be an integer >= 0`);
  return Number(t);
}

export async function listRunEvents(deps: Deps, accountId: string, runId: string, afterSequence = 0) {
  if (!Number.isSafeInteger(afterSequence) || afterSequence < 0) throw new ApiError('invalid_cursor', 'afterSequence must be an integer >= 0');
  if (!isUuid(runId)) throw notFound('run');
  const em = fork(deps);
  const run = await findAccountRun(em, accountId, runId);
  if (!run) throw notFound('run');
  const events = await readEvents(em, runId, afterSequence, EVENTS_PAGE_SIZE + 1);
  return { id: runId, events: events.slice(0, EVENTS_PAGE_SIZE), hasMore: events.length > EVENTS_PAGE_SIZE };
}
