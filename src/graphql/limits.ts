import { ApolloServerErrorCode } from '@apollo/server/errors';
import {
  getArgumentValues,
  getNamedType,
  getNullableType,
  getVariableValues,
  GraphQLError,
  isListType,
  isObjectType,
  isInterfaceType,
  Kind,
  parse,
  type DocumentNode,
  type FragmentDefinitionNode,
  type GraphQLCompositeType,
  type GraphQLField,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type ParseOptions,
  type SelectionSetNode,
  type ValidationRule,
} from 'graphql';

/**
 * Limits that keep one query from loading the whole database:
 * - size: the parser reads at most MAX_TOKENS tokens of the query (variables apart) and stops there, so a
 *   query nested thousands of levels deep is a parse failure (GRAPHQL_PARSE_FAILED) before the parser's
 *   recursion can exhaust the stack;
 * - depth: at most MAX_DEPTH nested fields (a validation rule; introspection fields are not counted);
 * - page size: every `limit` argument is 1..MAX_PAGE_LIMIT (checked by the resolvers' page helper);
 * - cost: a static estimate, computed once the variables are known, must stay within MAX_COST. Each
 *   field costs 1; a field with a `limit` argument multiplies its selection's cost by that limit;
 *   `_entities` by its number of representations; other list fields by LIST_SIZE_HINT (the page
 *   lists `RunPage.runs` / `WorkflowPage.workflows` by 1, their parent already counted the limit).
 */

export const MAX_DEPTH = 8;
export const MAX_PAGE_LIMIT = 100;
export const MAX_COST = 10_000;
export const MAX_TOKENS = 1_000;
export const PARSE_OPTIONS: ParseOptions = { maxTokens: MAX_TOKENS };
const LIST_SIZE_HINT = 10;

export function badInput(message: string): GraphQLError {
  return new GraphQLError(message, { extensions: { code: 'BAD_USER_INPUT' } });
}

/** Checks offset/limit arguments the same way everywhere; null means "the default". */
export function page(offset: number | null | undefined, limit: number | null | undefined, defaultLimit = 20): { offset: number; limit: number } {
  const o = offset ?? 0;
  const l = limit ?? defaultLimit;
  if (!Number.isSafeInteger(o) || o < 0) throw badInput('offset must be an integer >= 0');
  if (!Number.isSafeInteger(l) || l < 1 || l > MAX_PAGE_LIMIT) throw badInput(`limit must be an integer from 1 to ${MAX_PAGE_LIMIT}`);
  return { offset: o, limit: l };
}

/** A query's document, or the GRAPHQL_PARSE_FAILED error saying why it has none. */
export function parseQuery(source: string): DocumentNode | GraphQLError {
  try {
    return parse(source, PARSE_OPTIONS);
  } catch (err) {
    return parseFailure(err);
  }
}

/**
 * The parse failure for what the parser threw: its syntax error as it is, or, for a query nested so deeply
 * that the parser's recursion ran out of stack within the token limit, a message that says so.
 */
export function parseFailure(err: unknown): GraphQLError {
  const extensions = { code: ApolloServerErrorCode.GRAPHQL_PARSE_FAILED };
  if (err instanceof GraphQLError) return new GraphQLError(err.message, { source: err.source, positions: err.positions, extensions });
  return new GraphQLError('the query could not be parsed: it is nested too deeply', { extensions });
}

type Fragments = Record<string, FragmentDefinitionNode>;

export function fragmentsOf(document: DocumentNode): Fragments {
  const out: Fragments = {};
  for (const d of document.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) out[d.name.value] = d;
  return out;
}

function depthOf(set: SelectionSetNode, fragments: Fragments, seen: Set<string>): number {
  let max = 0;
  for (const sel of set.selections) {
    if (sel.kind === Kind.FIELD) {
      if (sel.name.value.startsWith('__')) continue;
      max = Math.max(max, 1 + (sel.selectionSet ? depthOf(sel.selectionSet, fragments, seen) : 0));
    } else if (sel.kind === Kind.INLINE_FRAGMENT) {
      max = Math.max(max, depthOf(sel.selectionSet, fragments, seen));
    } else {
      const name = sel.name.value;
      const frag = fragments[name];
      if (!frag || seen.has(name)) continue; // unknown or cyclic spreads are reported by the standard rules
      seen.add(name);
      max = Math.max(max, depthOf(frag.selectionSet, fragments, seen));
      seen.delete(name);
    }
  }
  return max;
}

/** Validation rule: rejects operations nested deeper than `max` fields. */
export function depthLimitRule(max = MAX_DEPTH): ValidationRule {
  return (context) => {
    const fragments = fragmentsOf(context.getDocument());
    return {
      OperationDefinition(node) {
        const depth = depthOf(node.selectionSet, fragments, new Set());
        if (depth > max) {
          context.reportError(
            new GraphQLError(`the query is nested ${depth} levels deep; at most ${max} are allowed`, {
              nodes: [node],
              extensions: { code: 'QUERY_TOO_DEEP' },
            }),
          );
        }
      },
    };
  };
}

export function selectOperation(document: DocumentNode, operationName?: string | null): OperationDefinitionNode | undefined {
  const ops = document.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
  return operationName ? ops.find((o) => o.name?.value === operationName) : ops.length === 1 ? ops[0] : undefined;
}

/**
 * The estimated cost of the operation that will run, or null when it cannot be estimated (unknown
 * operation, bad variables: execution reports those itself).
 */
export function operationCost(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | null | undefined,
  variables: Record<string, unknown> | null | undefined,
): number | null {
  const op = selectOperation(document, operationName);
  if (!op) return null;
  const root = schema.getRootType(op.operation);
  if (!root) return null;
  const coerced = getVariableValues(schema, op.variableDefinitions ?? [], variables ?? {});
  if (coerced.errors) return null;
  const fragments = fragmentsOf(document);

  const costOf = (set: SelectionSetNode, parent: GraphQLCompositeType, seen: Set<string>): number => {
    let total = 0;
    for (const sel of set.selections) {
      if (sel.kind === Kind.INLINE_FRAGMENT) {
        const t = sel.typeCondition ? (schema.getType(sel.typeCondition.name.value) as GraphQLCompositeType | undefined) : parent;
        if (t) total += costOf(sel.selectionSet, t, seen);
        continue;
      }
      if (sel.kind === Kind.FRAGMENT_SPREAD) {
        const frag = fragments[sel.name.value];
        if (!frag || seen.has(frag.name.value)) continue;
        const t = schema.getType(frag.typeCondition.name.value) as GraphQLCompositeType | undefined;
        if (!t) continue;
        seen.add(frag.name.value);
        total += costOf(frag.selectionSet, t, seen);
        seen.delete(frag.name.value);
        continue;
      }
      const name = sel.name.value;
      if (name.startsWith('__')) continue;
      if (!isObjectType(parent) && !isInterfaceType(parent)) continue;
      const field = parent.getFields()[name] as GraphQLField<unknown, unknown> | undefined;
      if (!field) continue;
      let args: Record<string, unknown> = {};
      try {
        args = getArgumentValues(field, sel, coerced.coerced);
      } catch {
        return Number.NaN; // execution reports the bad argument
      }
      const child = sel.selectionSet ? costOf(sel.selectionSet, getNamedType(field.type) as GraphQLCompositeType, seen) : 0;
      let times = 1;
      if (typeof args.limit === 'number') times = Math.min(Math.max(args.limit, 1), MAX_PAGE_LIMIT);
      else if (Array.isArray(args.representations)) times = args.representations.length;
      else if (isListType(getNullableType(field.type)) && sel.selectionSet) times = parent.name.endsWith('Page') ? 1 : LIST_SIZE_HINT;
      total += 1 + times * child;
    }
    return total;
  };

  const cost = costOf(op.selectionSet, root, new Set());
  return Number.isNaN(cost) ? null : cost;
}

/** The error for an operation over budget, or null when it is within it. */
export function costError(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | null | undefined,
  variables: Record<string, unknown> | null | undefined,
  max = MAX_COST,
): GraphQLError | null {
  const cost = operationCost(schema, document, operationName, variables);
  if (cost === null || cost <= max) return null;
  return new GraphQLError(`the query's estimated cost ${cost} exceeds the budget of ${max}; request smaller pages or fewer nested lists`, {
    extensions: { code: 'QUERY_TOO_COMPLEX', cost, maxCost: max, http: { status: 400 } },
  });
}
