import 'reflect-metadata';
import { ArgsType, Field, ID, Int, ObjectType } from 'type-graphql';
import { JsonScalar } from './scalars.ts';

/** Runs in sets on the graph (docs/design/runs-in-sets.md): the bulk cancel and replay by filter. */

@ArgsType()
export class CancelRunsArgs {
  @Field(() => ID, { description: 'The account whose runs the filter matches.' }) accountId!: string;
  @Field(() => JsonScalar, { description: 'RunFilter as REST takes it: status (list statuses), workflow, metadata, createdAfter, createdBefore.' })
  filter!: unknown;
  @Field(() => String, { nullable: true, description: 'nextCursor of the call before, with the same filter.' }) cursor?: string | null;
  @Field(() => Boolean, { nullable: true, defaultValue: false, description: 'Count what would be cancelled, change nothing.' }) dryRun?: boolean | null;
}

@ObjectType('CancelRunsResult', { description: 'What POST /runs/cancel answers for a filter.' })
export class CancelRunsResultType {
  @Field(() => Boolean) dryRun!: boolean;
  @Field(() => Int) matched!: number;
  @Field(() => Int) cancelled!: number;
  @Field(() => Int) alreadyTerminal!: number;
  @Field(() => String, { nullable: true }) nextCursor!: string | null;
}

@ArgsType()
export class ReplayRunsArgs {
  @Field(() => ID, { description: "The API key the replays are started for: its account's runs, its spend cap." }) apiKeyId!: string;
  @Field(() => JsonScalar, { description: 'RunFilter as REST takes it.' }) filter!: unknown;
  @Field(() => String, { nullable: true }) cursor?: string | null;
  @Field(() => JsonScalar, { nullable: true, description: "Inputs merged over each run's (password inputs must be given again)." }) inputs?: unknown;
  @Field(() => Boolean, { nullable: true, defaultValue: false, description: "Run the workflow's current version, not the run's." })
  currentVersion?: boolean | null;
}

@ObjectType('ReplayItem', { description: "One run's replay: the new run's id, or the error the single replay gives." })
export class ReplayItemType {
  @Field(() => Int) index!: number;
  @Field(() => ID, { nullable: true }) runId!: string | null;
  @Field(() => String, { nullable: true }) errorCode!: string | null;
  @Field(() => String, { nullable: true }) errorMessage!: string | null;
}

@ObjectType('ReplayRunsResult')
export class ReplayRunsResultType {
  @Field(() => [ReplayItemType]) items!: ReplayItemType[];
  @Field(() => Int) accepted!: number;
  @Field(() => Int) refused!: number;
  @Field(() => String, { nullable: true }) nextCursor!: string | null;
}
