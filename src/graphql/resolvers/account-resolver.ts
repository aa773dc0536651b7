import 'reflect-metadata';
import { Arg, Args, Ctx, FieldResolver, Query, Resolver, Root } from 'type-graphql';
import { PageArgs } from '../types/args.ts';
import type { GraphqlContext } from '../context.ts';
import { page } from '../limits.ts';
import type { AccountRecord, PurchaseRecord } from '../queries/accounts.ts';
import {
  AccountType,
  ApiKeyType,
  LedgerEntryType,
  PurchaseType,
  WalletType,
  WebhookDeliveryType,
  WebhookEndpointType,
  WorkflowType,
  WorkflowVersionType,
} from '../types/objects.ts';

@Resolver(() => AccountType)
export class AccountResolver {
  @Query(() => AccountType, { nullable: true, description: 'An account by handle; null when unknown.' })
  account(@Arg('handle', () => String) handle: string, @Ctx() ctx: GraphqlContext): Promise<AccountRecord | null> {
    return ctx.loaders.accountByHandle.load(handle);
  }

  @FieldResolver(() => WalletType, { nullable: true })
  wallet(@Root() a: AccountRecord, @Ctx() ctx: GraphqlContext) {
    return ctx.loaders.wallet.load(a.id);
  }

  @FieldResolver(() => [LedgerEntryType], { description: 'Wallet history, newest first.' })
  ledger(@Root() a: AccountRecord, @Args(() => PageArgs) { offset, limit }: PageArgs, @Ctx() ctx: GraphqlContext) {
    return ctx.loaders.ledger.load({ parentId: a.id, ...page(offset, limit) });
  }

  @FieldResolver(() => [ApiKeyType], { description: 'Key metadata; never secrets or hashes.' })
  apiKeys(@Root() a: AccountRecord, @Ctx() ctx: GraphqlContext) {
    return ctx.loaders.apiKeys.load(a.id);
  }

  @FieldResolver(() => [WebhookEndpointType])
  webhookEndpoints(@Root() a: AccountRecord, @Ctx() ctx: GraphqlContext) {
    return ctx.loaders.webhookEndpoints.load(a.id);
  }

  @FieldResolver(() => [WebhookDeliveryType], { description: 'Webhook deliveries to any of the account\'s endpoints, newest first.' })
  webhookDeliveries(@Root() a: AccountRecord, @Args(() => PageArgs) { offset, limit }: PageArgs, @Ctx() ctx: GraphqlContext) {
    return ctx.loaders.webhookDeliveries.load({ parentId: a.id, ...page(offset, limit) });
  }

  @FieldResolver(() => [PurchaseType])
  purchases(@Root() a: AccountRecord, @Ctx() ctx: GraphqlContext) {
    return ctx.loaders.purchases.load(a.id);
  }
}

@Resolver(() => PurchaseType)
export class PurchaseResolver {
  @FieldResolver(() => WorkflowType)
  workflow(@Root() p: PurchaseRecord, @Ctx() ctx: GraphqlContext) {
    return ctx.loaders.workflow.load(p.workflowId);
  }

  @FieldResolver(() => WorkflowVersionType)
  pinnedVersion(@Root() p: PurchaseRecord, @Ctx() ctx: GraphqlContext) {
    return ctx.loaders.version.load(p.pinnedVersionId);
  }
}
