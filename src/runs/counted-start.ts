import { ApiError, UnreceivedBody } from '../domain/errors.ts';
import type { Principal } from '../domain/principal.ts';
import { RequestRate, type RateDecision, type RateLimiter } from './rate-limiter.ts';
import { startRun, type StartRunRequest, type StartRunResult } from './start-run.ts';
import type { Deps } from './deps.ts';
import { checkBatch, quoteBatch, startBatch, type BatchAnswer, type BatchQuote, type StartBatchRequest } from './start-batch.ts';

/**
 * A start request (POST /runs, POST /runs/batch) in its key's rate window (docs/design/rules.md#rate-limit):
 * the one place a request is counted. Every request that got past authentication and scope counts once
 * its body has arrived (one whose body never arrives is counted nowhere), before anything else is checked,
 * so a full window answers 429 whatever else is wrong with the request and never creates a run. A
 * refusal carries the window it was counted in (its RateLimit-* headers).
 */

export interface CountedStart extends StartRunResult {
  /** The window after this request (RateLimit-* headers). */
  rateLimit: RateDecision;
}

/** Reads the request (`read`: the adapter's body parsing), counts it, then starts the run. */
export async function startCountedRun(deps: Deps, principal: Principal, limiter: RateLimiter, read: () => Promise<StartRunRequest>): Promise<CountedStart> {
  return counting(principal, limiter, read, async (request, rateLimit) => ({ ...(await startRun(deps, principal, request)), rateLimit }));
}

export interface CountedBatch {
  answer: BatchAnswer;
  rateLimit: RateDecision;
  /** The key's run budget after the batch drew its runs. */
  runBudget: RateDecision;
}

/**
 * Counts POST /runs/batch as one request, reads and checks it, then draws its runs from the key's run
 * budget (all or none: 429 when the budget cannot hold them) and starts them.
 */
export async function startCountedBatch(deps: Deps, principal: Principal, limiter: RateLimiter, read: () => Promise<StartBatchRequest>): Promise<CountedBatch> {
  return counting(principal, limiter, read, async (request, rateLimit) => {
    const batch = await checkBatch(deps, principal, request);
    const runBudget = await limiter.draw(principal.apiKeyId, principal.runBudgetPerMinute, batch.runs.length);
    return { answer: await startBatch(deps, principal, batch), rateLimit, runBudget };
  });
}

/** `?dryRun=true`: counts the request (it draws nothing from the run budget: it starts nothing), then quotes it. */
export async function quoteCountedBatch(
  deps: Deps,
  principal: Principal,
  limiter: RateLimiter,
  read: () => Promise<StartBatchRequest>,
): Promise<{ answer: BatchQuote; rateLimit: RateDecision }> {
  return counting(principal, limiter, read, async (request, rateLimit) => ({
    answer: await quoteBatch(deps, principal, await checkBatch(deps, principal, request)),
    rateLimit,
  }));
}

/** Reads the request, counts it, then runs `start`; a refusal is answered with the window it was counted in. */
export async function counting<R, T>(
  principal: Principal,
  limiter: RateLimiter,
  read: () => Promise<R>,
  start: (request: R, rateLimit: RateDecision) => Promise<T>,
): Promise<T> {
  const rate = new RequestRate(limiter, principal.apiKeyId, principal.rateLimitPerMinute);
  try {
    const request = await read();
    return await start(request, (await rate.count())!);
  } catch (err) {
    throw await counted(rate, err);
  }
}

/** A start request refused before it was read (its parameters): what to answer once it is counted. */
export function refuseStart(principal: Principal, limiter: RateLimiter, err: unknown): Promise<unknown> {
  return counted(new RequestRate(limiter, principal.apiKeyId, principal.rateLimitPerMinute), err);
}

/**
 * Counts a refused request unless it was counted already: its error, or the 429 when the window is full.
 * A request whose body never arrived (UnreceivedBody) is not counted: the client's request never came.
 */
async function counted(rate: RequestRate, err: unknown): Promise<unknown> {
  if (err instanceof UnreceivedBody) return err;
  const answer = rate.settled
    ? err
    : await rate.count().then(
        () => err,
        (refused: unknown) => refused,
      );
  if (rate.decision && answer instanceof ApiError && !answer.facts.rateLimit) answer.facts.rateLimit = rate.decision;
  return answer;
}
