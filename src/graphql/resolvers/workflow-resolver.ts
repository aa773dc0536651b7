import 'reflect-metadata';
import { Arg, Args, Ctx, FieldResolver, ID, Mutation, Query, Resolver, Root } from 'type-graphql';
import { fork } from '../../services/deps.ts';
import { acceptWorkflowUpdate } from '../../services/workflows/accept-workflow-update.ts';
import type { GraphqlContext } from '../context.ts';
import { notFoundError } from '../errors.ts';
import { page } from '../limits.ts';
import { searchWorkflows, type WorkflowRecord, type WorkflowVersionRecord } from '../queries/workflows.ts';
import { AcceptWorkflowUpdateArgs, PageArgs, WorkflowsArgs } from '../types/args.ts';
import { AccountType, WorkflowPage, WorkflowType, WorkflowVersionType } from '../types/objects.ts';

@Resolver(() => WorkflowType)
export class WorkflowResolver {
  @Query(() => WorkflowType, { nullable: true, description: 'Any workflow by id, whatever its listing; null when unknown.' })
  workflow(@Arg('id', () => ID) id: string, @Ctx() ctx: GraphqlContext): Promise<WorkflowRecord | null> {
    return ctx.loaders.workflow.load(id.toLowerCase());
  }

  @Query(() => WorkflowPage, { description: 'Every workflow (all listings), ordered by name then id.' })
  async workflows(@Args(() => WorkflowsArgs) args: WorkflowsArgs, @Ctx() ctx: GraphqlContext) {
    const p = page(args.offset, args.limit);
    const { workflows, hasMore } = await searchWorkflows(fork(ctx.deps), { ownerHandle: args.ownerHandle, listing: args.listing, q: args.q, ...p });
    for (const w of workflows) ctx.loaders.workflow.prime(w.id, w);
    return { workflows, pagination: { ...p, hasMore } };
  }

  @Mutation(() => WorkflowType, {
    description: 'Re-pins the account\'s purchase to the active version (REST accept-update). FORBIDDEN without a purchase.',
  })
  async acceptWorkflowUpdate(@Args(() => AcceptWorkflowUpdateArgs) { workflowId, accountHandle }: AcceptWorkflowUpdateArgs, @Ctx() ctx: GraphqlContext): Promise<WorkflowRecord> {
    const account = await ctx.loaders.accountByHandle.load(accountHandle);
    if (!account) throw notFoundError('account');
    await acceptWorkflowUpdate(ctx.deps, account.id, workflowId);
    ctx.loaders.purchases.clear(account.id);
    const wf = await ctx.loaders.workflow.clear(workflowId.toLowerCase()).load(workflowId.toLowerCase());
    if (!wf) throw notFoundError('workflow');
    return wf;
  }

  @FieldResolver(() => AccountType)
  owner(@Root() wf: WorkflowRecord, @Ctx() ctx: GraphqlContext) {
    return ctx.loaders.account.load(wf.ownerId);
  }

  @FieldResolver(() => WorkflowVersionType, { nullable: true })
  activeVersion(@Root() wf: WorkflowRecord, @Ctx() ctx: GraphqlContext) {
    return wf.activeVersionId ? ctx.loaders.version.load(wf.activeVersionId) : null;
  }

  @FieldResolver(() => [WorkflowVersionType], { description: 'Every version, newest first.' })
  versions(@Root() wf: WorkflowRecord, @Args(() => PageArgs) { offset, limit }: PageArgs, @Ctx() ctx: GraphqlContext): Promise<WorkflowVersionRecord[]> {
    return ctx.loaders.workflowVersions.load({ parentId: wf.id, ...page(offset, limit) });
  }
}

@Resolver(() => WorkflowVersionType)
export class WorkflowVersionResolver {
  @FieldResolver(() => WorkflowType)
  workflow(@Root() v: WorkflowVersionRecord, @Ctx() ctx: GraphqlContext) {
    return ctx.loaders.workflow.load(v.workflowId);
  }
}
