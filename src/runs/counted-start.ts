import { ApiError, UnreceivedBody } from '../domain/errors.ts';
import type { Principal } from '../services/auth/authenticate-key.ts';
import { RequestRate, type RateDecision, type RateLimiter } from './rate-limiter.ts';
import { startRun, type StartRunRequest, type StartRunResult } from './start-run.ts';
import type { Deps } from '../services/deps.ts';

/**
 * POST /runs in its key's rate window (docs/design/rules.md#rate-limit). Every request that got past
 * authentication and scope counts: one that reaches the workflow read in that read's statement
 * (start-run.ts), any other on its own before its error is answered, so a full window answers 429
 * whatever else is wrong with the request. A refusal carries the window it was counted in (its
 * RateLimit-* headers).
 */

export interface CountedStart extends StartRunResult {
  /** The window after this request (RateLimit-* headers). */
  rateLimit: RateDecision;
}

/** Reads the request (`read`: the adapter's body parsing, refused requests count too) and starts the run. */
export async function startCountedRun(
  deps: Deps,
  principal: Principal,
  limiter: RateLimiter,
  read: () => Promise<Omit<StartRunRequest, 'rate'>>,
): Promise<CountedStart> {
  const rate = new RequestRate(limiter, principal.apiKeyId, principal.rateLimitPerMinute);
  try {
    const result = await startRun(deps, principal, { ...(await read()), rate });
    return { ...result, rateLimit: (await rate.count())! };
  } catch (err) {
    throw await counted(rate, err);
  }
}

/** A POST /runs refused before it was read (its parameters): what to answer once it is counted. */
export function refuseStart(principal: Principal, limiter: RateLimiter, err: unknown): Promise<unknown> {
  return counted(new RequestRate(limiter, principal.apiKeyId, principal.rateLimitPerMinute), err);
}

/**
 * Counts a refused request unless it was counted already: its error, or the 429 when the window is full.
 * A request whose body never arrived (UnreceivedBody) is not counted: the client's request never came.
 */
async function counted(rate: RequestRate, err: unknown): Promise<unknown> {
  if (err instanceof UnreceivedBody) return err;
  const answer = rate.settled ? err : await rate.count().then(() => err, (refused: unknown) => refused);
  if (rate.decision && answer instanceof ApiError && !answer.facts.rateLimit) answer.facts.rateLimit = rate.decision;
  return answer;
}
