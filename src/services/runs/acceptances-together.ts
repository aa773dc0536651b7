import type { GroupStatement } from '../../db/group-commit.ts';
import { RefusedLately } from '../../db/refused-lately.ts';
import { ACCEPT_RUN_MANY } from '../../sql/accept-run-many.ts';

/**
 * API keys whose window a group could not take whole lately (the one statement raised: some of its
 * acceptances are over the limit): each acceptance over the limit gets its own 429 statement by statement.
 */
const full = new RefusedLately();

/**
 * Whether a group of ACCEPT_RUN executions (its values in order: src/services/runs/accept-run.ts) can go
 * as ACCEPT_RUN_MANY: no spend cap ($17, $18) and no sealed inputs ($19), one engine ($13), each
 * idempotency key of an account once ($2, $14: the one insert could not claim one record twice), one
 * limit per API key ($3, $24), and no key whose window was full lately.
 */
function combinable(group: readonly (readonly unknown[])[]): boolean {
  const engine = group[0]![12];
  const claimed = new Set<string>();
  const limits = new Map<unknown, unknown>();
  for (const v of group) {
    if (v[16] != null || v[17] != null || (v[18] as readonly unknown[] | null)?.length) return false;
    if (v[12] !== engine) return false;
    if (v[13] != null) {
      const claim = `${String(v[1])}\u0000${String(v[13])}`;
      if (claimed.has(claim)) return false;
      claimed.add(claim);
    }
    const limit = v[23] ?? null;
    if (limits.has(v[2]) && limits.get(v[2]) !== limit) return false;
    limits.set(v[2], limit);
    if (full.has(String(v[2]))) return false;
  }
  return true;
}

/** The columns of ACCEPT_RUN_MANY's arrays, by the single statement's parameter index (0-based). */
const COLUMNS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 21, 22, 23];

/**
 * A group of acceptances as the one statement ACCEPT_RUN_MANY (src/sql/accept-run-many.ts), or null:
 * statement by statement. See docs/round-trips.md#a-group-of-acceptances-as-one-statement.
 */
export const ACCEPTANCES_TOGETHER: GroupStatement = {
  combine(group) {
    if (!combinable(group)) return null;
    return [ACCEPT_RUN_MANY, COLUMNS.map((i) => group.map((v) => v[i] ?? null))];
  },
  failed(error, apiKeys) {
    if ((error as { code?: unknown }).code !== 'WR001') return;
    full.note(apiKeys);
  },
  split(rows, size) {
    const out: Record<string, unknown>[][] = Array.from({ length: size }, () => []);
    for (const row of rows) {
      const { ord, ...own } = row;
      out[Number(ord) - 1] = [own];
    }
    return out;
  },
};
