import 'reflect-metadata';
import { Args, Ctx, Mutation, Resolver } from 'type-graphql';
import { cancelRuns } from '../../runs/cancel-runs.ts';
import { replayRuns } from '../../runs/replay-run.ts';
import { principalOfKey } from '../../services/auth/authenticate-key.ts';
import type { GraphqlContext } from '../context.ts';
import { CancelRunsArgs, CancelRunsResultType, ReplayRunsArgs, ReplayRunsResultType } from '../types/runs-in-sets.ts';

/** The bulk cancel and replay by filter for internal teams: the REST services, as they are (docs/design/runs-in-sets.md). */
@Resolver()
export class RunsInSetsResolver {
  @Mutation(() => CancelRunsResultType, { description: "POST /runs/cancel by filter for an account's runs (one page of at most 1,000)." })
  async cancelRuns(@Args(() => CancelRunsArgs) args: CancelRunsArgs, @Ctx() ctx: GraphqlContext) {
    const body = { filter: givenMembers(args.filter), ...(args.cursor ? { cursor: args.cursor } : {}) };
    const result = await cancelRuns(ctx.deps, args.accountId.toLowerCase(), body, { dryRun: args.dryRun === true });
    return { ...result, nextCursor: result.nextCursor ?? null };
  }

  @Mutation(() => ReplayRunsResultType, { description: "POST /runs/replay by filter, for an API key's account (one page of at most 1,000)." })
  async replayRuns(@Args(() => ReplayRunsArgs) args: ReplayRunsArgs, @Ctx() ctx: GraphqlContext) {
    const principal = await principalOfKey(ctx.deps, args.apiKeyId);
    const body = {
      filter: givenMembers(args.filter),
      ...(args.cursor ? { cursor: args.cursor } : {}),
      ...(args.inputs === undefined || args.inputs === null ? {} : { inputs: args.inputs }),
      ...(args.currentVersion ? { version: 'current' } : {}),
    };
    const { body: result } = await replayRuns(ctx.deps, principal, body);
    const items = result.items.map((i) =>
      'run' in i
        ? { index: i.index, runId: i.run.id, errorCode: null, errorMessage: null }
        : { index: i.index, runId: null, errorCode: i.error.code, errorMessage: i.error.message },
    );
    return { ...result, items, nextCursor: result.nextCursor ?? null };
  }
}

/** A GraphQL input's members that were given: GraphQL's null is "not given", which the REST filter says by leaving a member out. */
function givenMembers(input: unknown): unknown {
  if (input === null || typeof input !== 'object') return input;
  return Object.fromEntries(Object.entries(input).filter(([, value]) => value !== null && value !== undefined));
}
