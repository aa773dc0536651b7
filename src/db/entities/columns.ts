import { p, Type } from '@mikro-orm/core';

/** Column types the model (src/db/entities/index.ts) shares. */

/**
 * A Postgres array of text (`text[]`) or of JSON (`jsonb[]`, its elements given as values), written as
 * its array literal: the ORM would expand a JS array parameter into a list.
 */
export class PgArrayType extends Type<unknown[], string> {
  constructor(private readonly json: boolean) {
    super();
  }

  override convertToDatabaseValue(value: unknown[]): string {
    const texts = this.json ? value.map((v) => (v === null || v === undefined ? null : JSON.stringify(v))) : value;
    return `{${texts.map(arrayElement).join(',')}}`;
  }

  override getColumnType(): string {
    return this.json ? 'jsonb[]' : 'text[]';
  }
}

/** An element of an array literal: NULL, or the text quoted with its backslashes and quotes escaped. */
const arrayElement = (value: unknown): string =>
  value === null || value === undefined ? 'NULL' : `"${String(value).replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;

export const money = () => p.decimal('string').precision(18).scale(6);
export const createdAt = () =>
  p
    .datetime()
    .defaultRaw('now()')
    .onCreate(() => new Date());

/**
 * A column of one of `values`, checked by its type: a domain over text that allows them
 * (Migration20261202030000RunDomains), not a table CHECK constraint, which Postgres would compile again
 * for every statement writing the table. MikroORM sees the domain's base type, text.
 */
export const checkedByDomain = <T extends readonly string[]>(_values: T) => p.text().$type<T[number]>();
