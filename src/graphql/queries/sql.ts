import { isoOrNull, json } from '../../db/sql.ts';
import { isUuid } from '../../domain/ids.ts';

/** Small helpers for the internal read queries (their statements are in src/sql/graphql-*.ts). */

/** Distinct valid UUIDs: anything else cannot match a uuid column and would make Postgres throw. */
export function uuids(ids: readonly string[]): string[] {
  return [...new Set(ids.filter((id) => isUuid(id)).map((id) => id.toLowerCase()))];
}

export const str = (v: unknown): string => String(v);
export const strOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));
export const iso = (v: unknown): string => isoOrNull(v)!;
export { isoOrNull, json };

/** A page of children per parent, read in one query with a window function. */
export interface ChildPageKey {
  parentId: string;
  offset: number;
  limit: number;
}

export const childPageKey = (k: ChildPageKey) => `${k.parentId}|${k.offset}|${k.limit}`;

/** Groups page keys that share offset/limit, so each group is one query. */
export function groupPages(keys: readonly ChildPageKey[]): { offset: number; limit: number; parentIds: string[] }[] {
  const groups = new Map<string, { offset: number; limit: number; parentIds: string[] }>();
  for (const k of keys) {
    const g = groups.get(`${k.offset}|${k.limit}`) ?? { offset: k.offset, limit: k.limit, parentIds: [] };
    if (isUuid(k.parentId)) g.parentIds.push(k.parentId.toLowerCase());
    groups.set(`${k.offset}|${k.limit}`, g);
  }
  return [...groups.values()];
}
