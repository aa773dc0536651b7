import { GraphQLError, GraphQLScalarType, Kind } from 'graphql';
import { GraphQLDateTimeISO, GraphQLJSON } from 'graphql-scalars';
import { toDb } from '../../domain/money.ts';

/**
 * Money on the internal graph: the `Decimal` scalar, an exact USD amount serialised as a string with
 * exactly 6 decimal places ("0.250000"), as stored (numeric(18,6)). A JSON number would lose exactness
 * for large balances (18 significant digits do not fit a double), and money is never a binary float
 * (docs/design/money.md).
 * As input it accepts such a string (or an integer literal) and yields the canonical 6-place string.
 */
const DECIMAL = /^-?\d{1,12}(\.\d{1,6})?$/;

function parseDecimal(value: unknown): string {
  const text = typeof value === 'number' && Number.isInteger(value) ? String(value) : value;
  if (typeof text !== 'string' || !DECIMAL.test(text.trim())) {
    throw new GraphQLError('Decimal must be a string like "12.500000" (at most 6 decimal places)', { extensions: { code: 'BAD_USER_INPUT' } });
  }
  return toDb(text.trim());
}

export const DecimalScalar = new GraphQLScalarType({
  name: 'Decimal',
  description: 'An exact USD amount: a string with exactly 6 decimal places, e.g. "0.250000".',
  serialize(value) {
    if (typeof value === 'string' || typeof value === 'number') return toDb(value);
    throw new GraphQLError(`Decimal cannot represent ${String(value)}`);
  },
  parseValue: parseDecimal,
  parseLiteral(ast) {
    if (ast.kind === Kind.STRING || ast.kind === Kind.INT) return parseDecimal(ast.kind === Kind.INT ? Number(ast.value) : ast.value);
    throw new GraphQLError('Decimal must be a string', { nodes: [ast], extensions: { code: 'BAD_USER_INPUT' } });
  },
});

/** ISO 8601 timestamps (UTC, millisecond precision), as the REST resources print them. */
export const DateTimeScalar = GraphQLDateTimeISO;

/** Free-form JSON (run outputs, event data), exactly the REST shapes. */
export const JsonScalar = GraphQLJSON;
