import {
  BREAK,
  getArgumentValues,
  getVariableValues,
  GraphQLError,
  isUnionType,
  TypeInfo,
  visit,
  visitWithTypeInfo,
  type DocumentNode,
  type GraphQLSchema,
} from 'graphql';
import { isStorableText } from '../domain/json-limits.ts';
import { selectOperation } from './limits.ts';

/**
 * The adapter's argument check, run once the operation and its variables are known and before anything
 * executes, on both endpoints (adapter.ts):
 * - every string in an argument's value (literal or variable, inside lists and input objects, `_Any`
 *   representations included) must be text Postgres can hold: no NUL, no unpaired UTF-16 surrogate;
 * - each `_entities` representation names, in `__typename`, an entity type of this subgraph.
 * A client's mistake there is BAD_USER_INPUT (HTTP 400) naming the argument, never a database error.
 */

const ENTITY_UNION = '_Entity';

const refuse = (message: string) => new GraphQLError(message, { extensions: { code: 'BAD_USER_INPUT', http: { status: 400 } } });

/** The path (below `name`) of the first string in `value` that Postgres cannot hold, or null. */
function unstorableAt(value: unknown, name: string): string | null {
  const stack: [unknown, string][] = [[value, name]];
  while (stack.length) {
    const [v, path] = stack.pop()!;
    if (typeof v === 'string') {
      if (!isStorableText(v)) return path;
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], `${path}[${i}]`]);
    } else if (v !== null && typeof v === 'object' && (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null)) {
      for (const [key, item] of Object.entries(v).reverse()) {
        if (!isStorableText(key)) return path;
        stack.push([item, `${path}.${key}`]);
      }
    }
  }
  return null;
}

function entityTypenameError(schema: GraphQLSchema, representations: unknown): GraphQLError | null {
  const union = schema.getType(ENTITY_UNION);
  const entities = new Set(isUnionType(union) ? union.getTypes().map((t) => t.name) : []);
  if (!Array.isArray(representations)) return null;
  for (const [i, rep] of representations.entries()) {
    const typename = (rep as { __typename?: unknown } | null)?.__typename;
    if (typeof typename !== 'string' || !entities.has(typename)) {
      const shown = typeof typename === 'string' ? `"${typename}"` : 'missing';
      return refuse(`argument "representations[${i}].__typename" of field "_entities" is ${shown}; it must name an entity type: ${[...entities].join(', ')}`);
    }
  }
  return null;
}

/** The error for the first argument of the operation that breaks those rules, or null. */
export function argumentError(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | null | undefined,
  variables: Record<string, unknown> | null | undefined,
): GraphQLError | null {
  const op = selectOperation(document, operationName);
  if (!op) return null;
  const coerced = getVariableValues(schema, op.variableDefinitions ?? [], variables ?? {});
  if (coerced.errors) return null; // execution reports bad variables itself
  const typeInfo = new TypeInfo(schema);
  let found: GraphQLError | null = null;
  visit(
    document,
    visitWithTypeInfo(typeInfo, {
      // Other operations of the document do not run; fragments are checked wherever they are used.
      OperationDefinition: (node) => (node === op ? undefined : false),
      Field(node) {
        const field = typeInfo.getFieldDef();
        if (!field || !node.arguments?.length) return undefined;
        let args: Record<string, unknown>;
        try {
          args = getArgumentValues(field, node, coerced.coerced);
        } catch {
          return undefined; // execution reports the bad argument
        }
        for (const [name, value] of Object.entries(args)) {
          const at = unstorableAt(value, name);
          if (at !== null) {
            found = refuse(`argument "${at}" of field "${field.name}" must not contain NUL characters or unpaired UTF-16 surrogates`);
            return BREAK;
          }
        }
        if (field.name === '_entities') found = entityTypenameError(schema, args.representations);
        return found ? BREAK : undefined;
      },
    }),
  );
  return found;
}
