import 'reflect-metadata';
import { buildSubgraphSchema, type GraphQLResolverMap } from '@apollo/subgraph';
import { createPubSub } from '@graphql-yoga/subscription';
import { printSchemaWithDirectives } from '@graphql-tools/utils';
import { parse, type GraphQLSchema } from 'graphql';
import { buildSchema, createResolversMap, type MiddlewareFn } from 'type-graphql';
import type { GraphqlContext } from './context.ts';
import { toGraphQLError } from './errors.ts';
import { AccountResolver, ApiKeyResolver, PurchaseResolver } from './resolvers/account-resolver.ts';
import { RunResolver } from './resolvers/run-resolver.ts';
import { RunsInSetsResolver } from './resolvers/runs-in-sets-resolver.ts';
import { RunEventsSubscriptionResolver } from './resolvers/subscription-resolver.ts';
import { WorkflowResolver, WorkflowVersionResolver } from './resolvers/workflow-resolver.ts';

/**
 * The federation v2 subgraph (stack notes recipe): type-graphql builds the schema from the decorated
 * classes, its SDL is printed with the @key directives and prefixed with the federation @link, and
 * @apollo/subgraph builds the served schema from that SDL plus type-graphql's resolvers and the
 * entities' reference resolvers. `typeDefs` is exactly what schema/subgraph.graphql holds.
 */

export const FEDERATION_LINK = 'extend schema @link(url: "https://specs.apollo.dev/federation/v2.7", import: ["@key", "@shareable"])';

/** Service errors become GraphQL errors with a code, for every resolver (see errors.ts). */
const ErrorCodes: MiddlewareFn<GraphqlContext> = async (_data, next) => {
  try {
    // type-graphql types a resolver's answer `any`; it is passed on untouched.
    const answer: unknown = await next();
    return answer;
  } catch (err) {
    throw toGraphQLError(err);
  }
};

async function buildTypeGraphqlSchema(): Promise<GraphQLSchema> {
  return buildSchema({
    resolvers: [
      RunResolver,
      WorkflowResolver,
      WorkflowVersionResolver,
      AccountResolver,
      ApiKeyResolver,
      PurchaseResolver,
      RunEventsSubscriptionResolver,
      RunsInSetsResolver,
    ],
    globalMiddlewares: [ErrorCodes],
    // type-graphql insists on a PubSub once a @Subscription exists; runEvents brings its own source
    // (`subscribe`), fed by the run event bus, so this one is never published to.
    pubSub: createPubSub(),
    // Federation directives (@key, @shareable) are declared by the @link, not by this schema.
    skipCheck: true,
    validate: false,
  });
}

export interface BuiltSchema {
  /** The served schema (federation fields _service, _entities included). */
  schema: GraphQLSchema;
  /** The subgraph SDL (schema/subgraph.graphql). */
  typeDefs: string;
}

let built: Promise<BuiltSchema> | undefined;

export function graphqlSchema(): Promise<BuiltSchema> {
  built ??= (async () => {
    const base = await buildTypeGraphqlSchema();
    const typeDefs = `${FEDERATION_LINK}\n\n${printSchemaWithDirectives(base).trim()}\n`;
    const generated = createResolversMap(base) as GraphQLResolverMap<GraphqlContext>;
    const resolvers: GraphQLResolverMap<GraphqlContext> = { ...generated };
    const reference = (type: string, load: (ctx: GraphqlContext, id: string) => Promise<unknown>) => {
      resolvers[type] = {
        ...(generated[type] as object),
        __resolveReference: async (ref: { id: string }, ctx: GraphqlContext) => {
          try {
            return await load(ctx, String(ref.id).toLowerCase());
          } catch (err) {
            throw toGraphQLError(err);
          }
        },
      };
    };
    reference('Run', (ctx, id) => ctx.loaders.run.load(id));
    reference('Workflow', (ctx, id) => ctx.loaders.workflow.load(id));
    reference('WorkflowVersion', (ctx, id) => ctx.loaders.version.load(id));
    reference('Account', (ctx, id) => ctx.loaders.account.load(id));
    const schema = buildSubgraphSchema([{ typeDefs: parse(typeDefs), resolvers }]);
    return { schema, typeDefs };
  })().catch((err: unknown) => {
    // A build that failed is not kept: the next caller builds again (src/graphql/on-demand.ts).
    built = undefined;
    throw err;
  });
  return built;
}
