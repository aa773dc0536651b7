import { outsideTransaction } from '../db/statement.ts';
import { notFound } from '../domain/errors.ts';
import type { Deps } from './deps.ts';
import { isUuid } from '../domain/ids.ts';
import { findAccountRun, readEvents } from './run-views.ts';

export const EVENTS_PAGE_SIZE = 1000;

export async function listRunEvents(deps: Deps, accountId: string, runId: string, afterSequence = 0) {
  if (!isUuid(runId)) throw notFound('run');
  const em = outsideTransaction(deps.orm);
  const run = await findAccountRun(em, accountId, runId);
  if (!run) throw notFound('run');
  const events = await readEvents(em, runId, afterSequence, EVENTS_PAGE_SIZE + 1);
  return { id: runId, events: events.slice(0, EVENTS_PAGE_SIZE), hasMore: events.length > EVENTS_PAGE_SIZE };
}
