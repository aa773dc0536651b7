import { notFound } from '../../domain/errors.ts';
import { fork, type Deps } from '../deps.ts';
import { isUuid } from '../../domain/ids.ts';
import { queueOf } from './queue-positions.ts';
import { assertOutputsFit, findAccountRun, toPublicRun } from './run-views.ts';

export async function getRun(deps: Deps, accountId: string, runId: string) {
  if (!isUuid(runId)) throw notFound('run');
  const em = fork(deps);
  const run = await findAccountRun(em, accountId, runId);
  if (!run) throw notFound('run');
  assertOutputsFit(run, deps.config.maxOutputBytes);
  return toPublicRun(run, await queueOf(deps, run));
}
