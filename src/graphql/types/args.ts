import 'reflect-metadata';
import { ArgsType, Field, ID, Int } from 'type-graphql';
import { Listing, RunStatus } from './enums.ts';
import { ProviderCredentialInput } from './objects.ts';
import { DateTimeScalar } from './scalars.ts';

/**
 * Argument lists as @ArgsType classes: their fields print in declaration order, which keeps the SDL
 * in the order of schema/subgraph.graphql (parameter decorators are applied last to first).
 */

@ArgsType()
export class PageArgs {
  @Field(() => Int, { nullable: true, defaultValue: 0 }) offset?: number | null;
  @Field(() => Int, { nullable: true, defaultValue: 20, description: '1..100' }) limit?: number | null;
}

@ArgsType()
export class RunsArgs {
  @Field(() => String, { nullable: true }) accountHandle?: string | null;
  @Field(() => RunStatus, { nullable: true, description: 'Exact match: RUNNING does not include SUSPENDED.' }) status?: RunStatus | null;
  @Field(() => ID, { nullable: true }) workflowId?: string | null;
  @Field(() => Int, { nullable: true, defaultValue: 0 }) offset?: number | null;
  @Field(() => Int, { nullable: true, defaultValue: 20, description: '1..100' }) limit?: number | null;
  @Field(() => DateTimeScalar, { nullable: true, description: 'createdAt >= this instant.' }) createdAfter?: Date | null;
  @Field(() => DateTimeScalar, { nullable: true, description: 'createdAt < this instant.' }) createdBefore?: Date | null;
}

@ArgsType()
export class WorkflowsArgs {
  @Field(() => Int, { nullable: true, defaultValue: 0 }) offset?: number | null;
  @Field(() => Int, { nullable: true, defaultValue: 20, description: '1..100' }) limit?: number | null;
  @Field(() => String, { nullable: true }) ownerHandle?: string | null;
  @Field(() => Listing, { nullable: true }) listing?: Listing | null;
  @Field(() => String, { nullable: true, description: 'Case-insensitive match on name or description.' }) q?: string | null;
}

@ArgsType()
export class RunEventsArgs {
  @Field(() => Int, { nullable: true, defaultValue: 0, description: 'Events with a greater sequence; 0 = from the start.' }) afterSequence?: number | null;
  @Field(() => Int, { nullable: true, defaultValue: 100, description: '1..100' }) limit?: number | null;
}

@ArgsType()
export class SupplyRunCredentialsArgs {
  @Field(() => ID) runId!: string;
  @Field(() => [ProviderCredentialInput]) credentials!: ProviderCredentialInput[];
}

@ArgsType()
export class AcceptWorkflowUpdateArgs {
  @Field(() => ID) workflowId!: string;
  @Field(() => String) accountHandle!: string;
}

@ArgsType()
export class RunEventsSubscriptionArgs {
  @Field(() => ID) runId!: string;
  @Field(() => Int, { nullable: true, description: 'Replay events after this sequence; absent or 0: from the start.' }) afterSequence?: number | null;
}
