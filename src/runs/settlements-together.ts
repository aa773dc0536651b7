import type { GroupStatement } from '../db/group-commit.ts';
import { RefusedLately } from '../db/refused-lately.ts';
import { START_FINISH_AND_SETTLE_MANY } from '../sql/start-finish-and-settle-many.ts';

/**
 * Accounts of a group the one statement refused for lately (a wallet that does not cover its runs in
 * full: the single statements refuse a hold or record what is unpaid).
 */
const short = new RefusedLately();

/**
 * A group of START_FINISH_AND_SETTLE executions (src/sql/start-and-finish.ts) as the one statement
 * START_FINISH_AND_SETTLE_MANY: each of its parameters an array of the group's values in order, the
 * single statement's array parameters as JSON arrays. See docs/round-trips.md#a-group-of-settlements-as-one-statement.
 */
export const SETTLEMENTS_TOGETHER: GroupStatement = {
  combine(group, accounts) {
    // A run twice in one group would have its row written once: leave such a group to the statements.
    if (new Set(group.map((v) => v[0])).size !== group.length) return null;
    if (accounts.some((a) => short.has(a))) return null;
    const column = (i: number) => group.map((v) => v[i] ?? null);
    const json = (i: number) => group.map((v) => (v[i] == null ? null : JSON.stringify(v[i])));
    return [
      START_FINISH_AND_SETTLE_MANY,
      [
        column(0),
        json(1),
        json(2),
        column(3),
        column(4),
        column(5),
        json(6),
        column(7),
        column(8),
        json(9),
        json(10),
        // The data are JSON texts already: one JSON array of them per run.
        group.map((v) => `[${(v[11] as string[]).join(',')}]`),
        column(12),
        column(13),
        column(14),
        column(15),
        column(16),
      ],
    ];
  },
  failed(error, accounts) {
    if ((error as { code?: unknown }).code !== 'WR001') return;
    short.note(accounts);
  },
  split(rows, size) {
    const out: (Record<string, unknown>[] | 'alone')[] = Array.from({ length: size }, () => []);
    for (const row of rows) {
      const { ord, alone, ...own } = row;
      out[Number(ord) - 1] = alone === true ? 'alone' : [own];
    }
    return out;
  },
};
