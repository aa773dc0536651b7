import 'reflect-metadata';
import { Arg, Args, Ctx, FieldResolver, ID, Int, Mutation, Query, Resolver, Root } from 'type-graphql';
import type { Workflow, WorkflowVersion } from '../../db/entities/index.ts';
import { inputSchema } from '../../domain/graph/validate.ts';
import { acceptWorkflowUpdate } from '../../services/workflows/accept-workflow-update.ts';
import type { GraphqlContext } from '../context.ts';
import { notFoundError } from '../errors.ts';
import { page } from '../limits.ts';
import { searchWorkflows } from '../queries/workflows.ts';
import { AcceptWorkflowUpdateArgs, PageArgs, WorkflowsArgs } from '../types/args.ts';
import { AccountType, WorkflowPage, WorkflowType, WorkflowVersionType } from '../types/objects.ts';

@Resolver(() => WorkflowType)
export class WorkflowResolver {
  @Query(() => WorkflowType, { nullable: true, description: 'Any workflow by id, whatever its listing; null when unknown.' })
  workflow(@Arg('id', () => ID) id: string, @Ctx() ctx: GraphqlContext): Promise<Workflow | null> {
    return ctx.loaders.workflow.load(id.toLowerCase());
  }

  @Query(() => WorkflowPage, { description: 'Every workflow (all listings), ordered by name then id.' })
  async workflows(@Args(() => WorkflowsArgs) args: WorkflowsArgs, @Ctx() ctx: GraphqlContext) {
    const p = page(args.offset, args.limit);
    const { workflows, hasMore } = await searchWorkflows(ctx.em, { ownerHandle: args.ownerHandle, listing: args.listing, q: args.q, ...p });
    for (const w of workflows) ctx.loaders.workflow.prime(w.id, w);
    return { workflows, pagination: { ...p, hasMore } };
  }

  @Mutation(() => WorkflowType, {
    description: "Re-pins the account's purchase to the active version (REST accept-update). FORBIDDEN without a purchase.",
  })
  async acceptWorkflowUpdate(
    @Args(() => AcceptWorkflowUpdateArgs) { workflowId, accountHandle }: AcceptWorkflowUpdateArgs,
    @Ctx() ctx: GraphqlContext,
  ): Promise<Workflow> {
    const account = await ctx.loaders.accountByHandle.load(accountHandle);
    if (!account) throw notFoundError('account');
    await acceptWorkflowUpdate(ctx.deps, account.id, workflowId);
    // The service wrote outside this request's entity manager: what it holds may be stale.
    ctx.em.clear();
    ctx.loaders.purchases.clear(account.id);
    const wf = await ctx.loaders.workflow.clear(workflowId.toLowerCase()).load(workflowId.toLowerCase());
    if (!wf) throw notFoundError('workflow');
    return wf;
  }

  @FieldResolver(() => AccountType)
  owner(@Root() wf: Workflow, @Ctx() ctx: GraphqlContext) {
    return ctx.loaders.account.load(wf.ownerId);
  }

  @FieldResolver(() => String)
  async ownerHandle(@Root() wf: Workflow, @Ctx() ctx: GraphqlContext): Promise<string> {
    const owner = await ctx.loaders.account.load(wf.ownerId);
    if (!owner) throw notFoundError('account');
    return owner.handle;
  }

  @FieldResolver(() => WorkflowVersionType, { nullable: true })
  activeVersion(@Root() wf: Workflow, @Ctx() ctx: GraphqlContext) {
    return wf.activeVersionId ? ctx.loaders.version.load(wf.activeVersionId) : null;
  }

  @FieldResolver(() => [WorkflowVersionType], { description: 'Every version, newest first.' })
  versions(@Root() wf: Workflow, @Args(() => PageArgs) { offset, limit }: PageArgs, @Ctx() ctx: GraphqlContext): Promise<WorkflowVersion[]> {
    return ctx.loaders.workflowVersions.load({ parentId: wf.id, ...page(offset, limit) });
  }
}

@Resolver(() => WorkflowVersionType)
export class WorkflowVersionResolver {
  @FieldResolver(() => WorkflowType)
  workflow(@Root() v: WorkflowVersion, @Ctx() ctx: GraphqlContext) {
    return ctx.loaders.workflow.load(v.workflowId);
  }

  @FieldResolver(() => Int)
  inputCount(@Root() v: WorkflowVersion): number {
    return inputSchema(v.graph).length;
  }

  @FieldResolver(() => Boolean)
  async isActive(@Root() v: WorkflowVersion, @Ctx() ctx: GraphqlContext): Promise<boolean> {
    return (await ctx.loaders.workflow.load(v.workflowId))?.activeVersionId === v.id;
  }
}
