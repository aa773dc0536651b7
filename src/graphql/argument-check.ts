import {
  getArgumentValues,
  getNamedType,
  getVariableValues,
  GraphQLError,
  isInterfaceType,
  isObjectType,
  isUnionType,
  Kind,
  type DocumentNode,
  type FieldNode,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLSchema,
  type SelectionSetNode,
} from 'graphql';
import { isStorableText } from '../domain/json-limits.ts';
import { fragmentsOf, selectOperation } from './limits.ts';

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
  const root = op && schema.getRootType(op.operation);
  if (!op || !root) return null;
  const coerced = getVariableValues(schema, op.variableDefinitions ?? [], variables ?? {});
  if (coerced.errors) return null; // execution reports bad variables itself
  const fragments = fragmentsOf(document);
  const seen = new Set<string>();
  // Each selection set with the type it selects from; a fragment is checked once wherever it is spread.
  const work: [SelectionSetNode, GraphQLNamedType | undefined][] = [[op.selectionSet, root]];
  while (work.length) {
    const [set, parent] = work.pop()!;
    for (const sel of set.selections) {
      if (sel.kind === Kind.INLINE_FRAGMENT) {
        work.push([sel.selectionSet, sel.typeCondition ? schema.getType(sel.typeCondition.name.value) : parent]);
      } else if (sel.kind === Kind.FRAGMENT_SPREAD) {
        const frag = fragments[sel.name.value];
        if (frag && !seen.has(frag.name.value)) {
          seen.add(frag.name.value);
          work.push([frag.selectionSet, schema.getType(frag.typeCondition.name.value)]);
        }
      } else {
        const field = isObjectType(parent) || isInterfaceType(parent) ? parent.getFields()[sel.name.value] : undefined;
        if (!field) continue; // introspection, __typename, or unknown (validation reports those)
        if (sel.arguments?.length) {
          const err = fieldArgumentError(schema, field, sel, coerced.coerced);
          if (err) return err;
        }
        if (sel.selectionSet) work.push([sel.selectionSet, getNamedType(field.type)]);
      }
    }
  }
  return null;
}

function fieldArgumentError(
  schema: GraphQLSchema,
  field: GraphQLField<unknown, unknown>,
  node: FieldNode,
  variables: Record<string, unknown>,
): GraphQLError | null {
  let args: Record<string, unknown>;
  try {
    args = getArgumentValues(field, node, variables);
  } catch {
    return null; // execution reports the bad argument
  }
  for (const [name, value] of Object.entries(args)) {
    const at = unstorableAt(value, name);
    if (at !== null) return refuse(`argument "${at}" of field "${field.name}" must not contain NUL characters or unpaired UTF-16 surrogates`);
  }
  return field.name === '_entities' ? entityTypenameError(schema, args.representations) : null;
}
