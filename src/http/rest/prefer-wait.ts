import { MAX_WAIT_SECONDS, waitForRunResult } from '../../runs/wait-for-run.ts';
import { preferredWaitSeconds } from '../prefer.ts';
import { sendJson } from '../respond.ts';
import type { RestCall } from './rest-call.ts';

/**
 * `Prefer: wait=N` on POST /runs (docs/design/prefer-wait.md). Called only when the header is present,
 * after the run was accepted. Answers 200 with the finished run and returns true, or returns false and
 * adds `Preference-Applied` to `headers` for the caller's usual 202. A client that goes away ends the
 * wait at once (the run goes on) and gets nothing; that also returns true.
 */
export async function answerWhenFinished(
  c: RestCall,
  runId: string,
  prefer: string | string[],
  since: number,
  headers: Record<string, string>,
): Promise<boolean> {
  const seconds = preferredWaitSeconds(String(prefer), MAX_WAIT_SECONDS);
  if (seconds === null) return false;
  headers['Preference-Applied'] = `wait=${seconds}`;
  if (c.req.socket.destroyed) return true;
  const gone = new AbortController();
  const abort = () => gone.abort();
  c.res.once('close', abort);
  try {
    const run = await waitForRunResult(c.deps, c.principal.accountId, runId, since + seconds * 1000 - Date.now(), gone.signal);
    if (gone.signal.aborted) return true;
    if (!run) return false;
    sendJson(c.res, 200, run, headers);
    return true;
  } finally {
    c.res.off('close', abort);
  }
}
