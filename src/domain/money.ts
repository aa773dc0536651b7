import { Decimal } from 'decimal.js';

/**
 * Exact USD arithmetic. Amounts travel as decimal strings with 6 places (numeric(18,6) in Postgres) and
 * become JSON numbers only at the API edge, where 6 places survive a double exactly enough to print back.
 */

const D = Decimal.clone({ precision: 40, rounding: Decimal.ROUND_HALF_UP });
export type Usd = InstanceType<typeof D>;

export const usd = (v: string | number | Usd): Usd => new D(v);
export const ZERO = usd(0);

/** Canonical 6-place string for storage: `0.123557`. */
export function toDb(v: Usd | string | number): string {
  return usd(v).toDecimalPlaces(6, D.ROUND_HALF_UP).toFixed(6);
}

/** Already canonical: what numeric(18,6) columns read back as. */
const SIX_PLACES = /^-?\d{1,12}\.\d{6}$/;

/** JSON number for responses; `Number("0.123557")` round-trips the 6 places exactly when printed. */
export function toJson(v: Usd | string | number): number {
  // A 6-place text is its own canonical form: the same value, so the same number, without a Decimal
  // (`+ 0`: "-0.000000" is 0, as the Decimal prints it).
  if (typeof v === 'string' && SIX_PLACES.test(v)) return Number(v) + 0;
  return Number(toDb(v));
}

export function sum(values: (Usd | string | number)[]): Usd {
  return values.reduce<Usd>((acc, v) => acc.plus(usd(v)), ZERO);
}

export const minUsd = (a: Usd, b: Usd): Usd => (a.lessThan(b) ? a : b);

/**
 * The displayed run price (docs/design/money.md): the creator price charged to the caller plus `stepUsd`
 * per step node of the graph the run will execute. Shown on a workflow and fixed on a run at acceptance.
 */
export const displayedRunPrice = (creatorPriceUsd: Usd | string, stepUsd: string, steps: number): Usd => usd(creatorPriceUsd).plus(usd(stepUsd).times(steps));
