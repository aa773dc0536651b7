import 'reflect-metadata';
import { Arg, Args, Ctx, FieldResolver, ID, Query, Resolver, Root } from 'type-graphql';
import type { Account, Purchase } from '../../db/entities/index.ts';
import { PageArgs } from '../types/args.ts';
import type { GraphqlContext } from '../context.ts';
import { page } from '../limits.ts';
import type { ApiKeyMetadata } from '../queries/accounts.ts';
import {
  AccountType,
  ApiKeyType,
  LedgerEntryType,
  PurchaseType,
  SpendCapType,
  WalletType,
  WebhookDeliveryType,
  WebhookEndpointType,
  WorkflowType,
  WorkflowVersionType,
} from '../types/objects.ts';

@Resolver(() => AccountType)
export class AccountResolver {
  @Query(() => AccountType, { nullable: true, description: 'An account by handle; null when unknown.' })
  account(@Arg('handle', () => String) handle: string, @Ctx() ctx: GraphqlContext): Promise<Account | null> {
    return ctx.loaders.accountByHandle.load(handle);
  }

  @FieldResolver(() => WalletType, { nullable: true })
  wallet(@Root() a: Account, @Ctx() ctx: GraphqlContext) {
    return ctx.loaders.wallet.load(a.id);
  }

  @FieldResolver(() => [LedgerEntryType], { description: 'Wallet history, newest first.' })
  ledger(@Root() a: Account, @Args(() => PageArgs) { offset, limit }: PageArgs, @Ctx() ctx: GraphqlContext) {
    return ctx.loaders.ledger.load({ parentId: a.id, ...page(offset, limit) });
  }

  @FieldResolver(() => [ApiKeyType], { description: 'Key metadata; never secrets or hashes.' })
  apiKeys(@Root() a: Account, @Ctx() ctx: GraphqlContext) {
    return ctx.loaders.apiKeys.load(a.id);
  }

  @FieldResolver(() => [WebhookEndpointType])
  webhookEndpoints(@Root() a: Account, @Ctx() ctx: GraphqlContext) {
    return ctx.loaders.webhookEndpoints.load(a.id);
  }

  @FieldResolver(() => [WebhookDeliveryType], { description: "Webhook deliveries to any of the account's endpoints, newest first." })
  webhookDeliveries(@Root() a: Account, @Args(() => PageArgs) { offset, limit }: PageArgs, @Ctx() ctx: GraphqlContext) {
    return ctx.loaders.webhookDeliveries.load({ parentId: a.id, ...page(offset, limit) });
  }

  @FieldResolver(() => [PurchaseType])
  purchases(@Root() a: Account, @Ctx() ctx: GraphqlContext) {
    return ctx.loaders.purchases.load(a.id);
  }
}

@Resolver(() => ApiKeyType)
export class ApiKeyResolver {
  @FieldResolver(() => SpendCapType, { nullable: true })
  spendCap(@Root() key: ApiKeyMetadata): SpendCapType | null {
    return key.spendCapWindow ? ({ window: key.spendCapWindow, usd: key.spendCapUsd } as SpendCapType) : null;
  }
}

@Resolver(() => PurchaseType)
export class PurchaseResolver {
  @FieldResolver(() => WorkflowType)
  workflow(@Root() p: Purchase, @Ctx() ctx: GraphqlContext) {
    return ctx.loaders.workflow.load(p.workflowId);
  }

  @FieldResolver(() => WorkflowVersionType)
  pinnedVersion(@Root() p: Purchase, @Ctx() ctx: GraphqlContext) {
    return ctx.loaders.version.load(p.versionId);
  }

  @FieldResolver(() => ID, { nullable: true })
  async activeVersionId(@Root() p: Purchase, @Ctx() ctx: GraphqlContext): Promise<string | null> {
    return (await ctx.loaders.workflow.load(p.workflowId))?.activeVersionId ?? null;
  }

  @FieldResolver(() => Boolean)
  async updateAvailable(@Root() p: Purchase, @Ctx() ctx: GraphqlContext): Promise<boolean> {
    const active = await this.activeVersionId(p, ctx);
    return active !== null && active !== p.versionId;
  }
}
