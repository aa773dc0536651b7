import { raw, type EntityName, type FilterQuery } from '@mikro-orm/core';
import type { Em } from '../../db/orm.ts';
import { isUuid } from '../../domain/ids.ts';

/** What the graph's reads share: id lists, and pages of children for many parents in one statement. */

/** Distinct valid UUIDs: anything else cannot match a uuid column and would make Postgres throw. */
export function uuids(ids: readonly string[]): string[] {
  return [...new Set(ids.filter((id) => isUuid(id)).map((id) => id.toLowerCase()))];
}

/** A page of children per parent: `offset` counts rows (or is a cursor, for run events), `limit` caps the page. */
export interface ChildPageKey {
  parentId: string;
  offset: number;
  limit: number;
}

export const childPageKey = (k: ChildPageKey) => `${k.parentId}|${k.offset}|${k.limit}`;

/** Groups page keys that share offset/limit, so each group is one statement. */
export function groupPages(keys: readonly ChildPageKey[]): { offset: number; limit: number; parentIds: string[] }[] {
  const groups = new Map<string, { offset: number; limit: number; parentIds: string[] }>();
  for (const k of keys) {
    const g = groups.get(`${k.offset}|${k.limit}`) ?? { offset: k.offset, limit: k.limit, parentIds: [] };
    if (isUuid(k.parentId)) g.parentIds.push(k.parentId.toLowerCase());
    groups.set(`${k.offset}|${k.limit}`, g);
  }
  return [...groups.values()];
}

/** Adds `value` to the list under `key`. */
export function pushTo<K, V>(lists: Map<K, V[]>, key: K, value: V): void {
  const list = lists.get(key);
  if (list) list.push(value);
  else lists.set(key, [value]);
}

export interface PageQuery<T extends object> {
  entity: EntityName<T>;
  /** The children of every parent of the batch (and any further condition). */
  where: FilterQuery<T>;
  /** SQL naming a child's parent, over the alias `c` (a page is cut per value of it). */
  partition: string;
  /** Each page's order, as properties of the entity. */
  order: Partial<Record<keyof T & string, 'asc' | 'desc'>>;
  /** Properties to read (default every one): secrets stay in the database. */
  fields?: readonly (keyof T & string)[];
  /** The rows of each parent's page: its (first, last] rows in `order`. */
  after: number;
  upTo: number;
}

/**
 * Pages of children for many parents in one statement, through the QueryBuilder: the children are
 * numbered per parent with row_number() in a subquery, and the outer query keeps each parent's rows
 * (after, upTo]. Returns the entities in page order per parent (parents interleaved: group them by parent).
 */
export async function pagesOf<T extends object>(em: Em, q: PageQuery<T>): Promise<T[]> {
  const meta = em.getMetadata().get(q.entity);
  const column = (property: string) => `c.${meta.properties[property as keyof typeof meta.properties].fieldNames[0]}`;
  const order = Object.entries(q.order).map(([property, direction]) => `${column(property)} ${direction}`);
  const numbered = em
    .createQueryBuilder(q.entity, 'c')
    .select([...(q.fields ?? ['*']), raw(`row_number() over (partition by ${q.partition} order by ${order.join(', ')}) as page_row`)] as never)
    .where(q.where as never);
  return (await em
    .createQueryBuilder(q.entity, 'p')
    .from(numbered as never, 'p')
    .where(raw('p.page_row > ? and p.page_row <= ?', [q.after, q.upTo]))
    .orderBy({ [raw('p.page_row')]: 'asc' } as never)
    .getResultList()) as T[];
}
