import 'reflect-metadata';
import { Arg, Args, Ctx, FieldResolver, ID, Mutation, Query, Resolver, Root } from 'type-graphql';
import { cancelRun } from '../../runs/cancel-run.ts';
import { supplyRunCredentials } from '../../runs/supply-run-credentials.ts';
import type { GraphqlContext } from '../context.ts';
import { notFoundError } from '../errors.ts';
import { badInput, page } from '../limits.ts';
import { searchRuns, type RunRecord } from '../queries/runs.ts';
import { RunEventsArgs, RunsArgs, SupplyRunCredentialsArgs } from '../types/args.ts';
import { AccountType, RunEventType, RunPage, RunQueueType, RunType, WorkflowType, WorkflowVersionType } from '../types/objects.ts';

export const EVENTS_DEFAULT_LIMIT = 100;

/** Re-reads a run after a mutation: the service wrote outside this request's entity manager and loaders. */
async function reload(ctx: GraphqlContext, id: string): Promise<RunRecord> {
  ctx.em.clear();
  const run = await ctx.loaders.run.clear(id).load(id);
  if (!run) throw notFoundError('run');
  return run;
}

@Resolver(() => RunType)
export class RunResolver {
  @Query(() => RunType, { nullable: true, description: "Any account's run by id; null when unknown." })
  run(@Arg('id', () => ID) id: string, @Ctx() ctx: GraphqlContext): Promise<RunRecord | null> {
    return ctx.loaders.run.load(id.toLowerCase());
  }

  @Query(() => RunPage, { description: 'Runs of every account, newest first (createdAt desc, then id); the filters combine with and.' })
  async runs(@Args(() => RunsArgs) args: RunsArgs, @Ctx() ctx: GraphqlContext) {
    const p = page(args.offset, args.limit);
    const { runs, hasMore } = await searchRuns(ctx.em, {
      accountHandle: args.accountHandle,
      status: args.status,
      workflowId: args.workflowId,
      createdAfter: args.createdAfter,
      createdBefore: args.createdBefore,
      ...p,
    });
    for (const r of runs) ctx.loaders.run.prime(r.id, r);
    return { runs, pagination: { ...p, hasMore } };
  }

  @Mutation(() => RunType, {
    description: "Cancels any account's run (REST cancel rules: terminal runs are returned unchanged; CANCEL_UNAVAILABLE while settling).",
  })
  async cancelRun(@Arg('id', () => ID) id: string, @Ctx() ctx: GraphqlContext): Promise<RunRecord> {
    await cancelRun(ctx.deps, null, id);
    return reload(ctx, id.toLowerCase());
  }

  @Mutation(() => RunType, { description: 'The credentials signal: stores provider keys for a run suspended with wait_signal and resumes it.' })
  async supplyRunCredentials(
    @Args(() => SupplyRunCredentialsArgs) { runId, credentials }: SupplyRunCredentialsArgs,
    @Ctx() ctx: GraphqlContext,
  ): Promise<RunRecord> {
    await supplyRunCredentials(
      ctx.deps,
      runId,
      credentials.map((c) => ({ provider: c.provider, apiKey: c.apiKey })),
    );
    return reload(ctx, runId.toLowerCase());
  }

  @FieldResolver(() => RunQueueType, { nullable: true, description: 'Where the run waits while pending; null otherwise.' })
  queue(@Root() run: RunRecord, @Ctx() ctx: GraphqlContext) {
    return run.status === 'pending' ? ctx.loaders.runQueue.load(run.row) : null;
  }

  @FieldResolver(() => [RunEventType], { description: 'Events after a sequence, oldest first; page on with afterSequence = the last sequence.' })
  async events(@Root() run: RunRecord, @Args(() => RunEventsArgs) { afterSequence, limit }: RunEventsArgs, @Ctx() ctx: GraphqlContext) {
    const after = afterSequence ?? 0;
    if (!Number.isSafeInteger(after) || after < 0) throw badInput('afterSequence must be an integer >= 0');
    const p = page(0, limit, EVENTS_DEFAULT_LIMIT);
    return ctx.loaders.runEvents.load({ parentId: run.id, offset: after, limit: p.limit });
  }

  @FieldResolver(() => String)
  async accountHandle(@Root() run: RunRecord, @Ctx() ctx: GraphqlContext): Promise<string> {
    const account = await ctx.loaders.account.load(run.accountId);
    if (!account) throw notFoundError('account');
    return account.handle;
  }

  @FieldResolver(() => AccountType)
  async account(@Root() run: RunRecord, @Ctx() ctx: GraphqlContext) {
    return ctx.loaders.account.load(run.accountId);
  }

  @FieldResolver(() => WorkflowType)
  async workflow(@Root() run: RunRecord, @Ctx() ctx: GraphqlContext) {
    return ctx.loaders.workflow.load(run.workflowId);
  }

  @FieldResolver(() => WorkflowVersionType)
  async workflowVersion(@Root() run: RunRecord, @Ctx() ctx: GraphqlContext) {
    return ctx.loaders.version.load(run.workflowVersionId);
  }
}
