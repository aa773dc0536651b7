import { notFound } from '../domain/errors.ts';
import type { Deps } from './deps.ts';
import { outsideTransaction } from '../db/statement.ts';
import { isUuid } from '../domain/ids.ts';
import { queueOf } from './queue-positions.ts';
import { assertOutputsFit, findAccountRun, toPublicRun } from './run-views.ts';

export async function getRun(deps: Deps, accountId: string, runId: string) {
  if (!isUuid(runId)) throw notFound('run');
  const run = await findAccountRun(outsideTransaction(deps.orm), accountId, runId);
  if (!run) throw notFound('run');
  assertOutputsFit(run, deps.config.maxOutputBytes);
  return toPublicRun(run, await queueOf(deps, run));
}
