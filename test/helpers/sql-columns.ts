/**
 * The tables and columns a statement of src/sql uses, read from its text by patterns, not by a SQL
 * parser: the forms those statements are written in. What it cannot read it says, with the reason
 * (`unread`), so a test can list it instead of passing over it.
 */

/** Words that can follow a table name where an alias would stand: not aliases. */
const NOT_ALIASES = new Set(
  (
    'as on set where join left right inner full cross natural lateral using order group limit offset for select values returning ' +
    'union except intersect having window with do default'
  ).split(' '),
);

const WORD = '[a-z_][a-z0-9_]*';
/** A name after FROM, JOIN, INTO or UPDATE that is a table: not a keyword (`for update of r`, `do update set`, `join lateral`). */
const TABLE = `(?!(?:of|set|skip|nowait|lateral|only)\\b)(${WORD})\\b(?![.(])`;

/** The text without its string literals and double-quoted names' quotes, lower case: a literal's words are no names. */
export function bareSql(text: string): string {
  return text
    .replace(/'(?:[^']|'')*'/g, "''")
    .replace(/"([a-z_][a-z0-9_]*)"/g, '$1')
    .toLowerCase();
}

/** Names a FROM, JOIN, INSERT INTO, UPDATE or DELETE FROM reads or writes as a table (not functions: `unnest(`). */
export function tablesIn(sql: string): Set<string> {
  const found = new Set<string>();
  for (const m of sql.matchAll(new RegExp(`\\b(?:from|join|into|update)\\s+${TABLE}`, 'g'))) found.add(m[1]!);
  return found;
}

/** Names the text gives to CTEs (`x as (`, `x as materialized (`), subqueries (`) x`, `) as x`) and column-aliased sets (`as x(`). */
function derivedNames(sql: string): Set<string> {
  const found = new Set<string>();
  for (const m of sql.matchAll(new RegExp(`\\b(${WORD})\\s+as\\s+(?:not\\s+)?(?:materialized\\s+)?\\(`, 'g'))) found.add(m[1]!);
  for (const m of sql.matchAll(new RegExp(`\\)\\s+(?:as\\s+)?(${WORD})\\b`, 'g'))) if (!NOT_ALIASES.has(m[1]!)) found.add(m[1]!);
  for (const m of sql.matchAll(new RegExp(`(?<!\\binto\\s+${WORD}\\s+)\\bas\\s+(${WORD})\\s*\\(`, 'g'))) found.add(m[1]!);
  return found;
}

export interface ColumnUse {
  table: string;
  column: string;
  /** Where it was read: `insert`, `conflict`, `set`, `alias x`. */
  via: string;
}

export interface StatementColumns {
  uses: ColumnUse[];
  /** Each `insert into` of a table: its column list. */
  inserts: { table: string; columns: string[] }[];
  /** What could not be read, with why. */
  unread: string[];
}

/** The items of a comma-separated list from `start`, at parenthesis depth 0, up to a closing parenthesis or one of `stops`. */
function listFrom(sql: string, start: number, stops: RegExp): string[] {
  const items: string[] = [];
  let depth = 0;
  let from = start;
  for (let i = start; i < sql.length; i++) {
    const c = sql[i];
    if (c === '(') depth++;
    else if (c === ')') {
      if (depth === 0) return [...items, sql.slice(from, i)];
      depth--;
    } else if (depth === 0 && c === ',') {
      items.push(sql.slice(from, i));
      from = i + 1;
    } else if (depth === 0 && /\s/.test(c!) && stops.test(sql.slice(i + 1, i + 12))) return [...items, sql.slice(from, i)];
  }
  return [...items, sql.slice(from)];
}

/** The columns an `update … set` list assigns: `col = …` and `(a, b) = (…)`. */
function setTargets(sql: string, start: number): string[] {
  return listFrom(sql, start, /^(where|from|returning)\b/).flatMap((item) => {
    const target = item.trim().startsWith('(') ? item.slice(item.indexOf('(') + 1, item.indexOf(')')) : item.slice(0, item.indexOf('='));
    return target.split(',').map((c) => c.trim());
  });
}

/** The columns `sql` uses of the tables in `tables` (table name → its columns are checked by the caller). */
export function statementColumns(text: string, tables: ReadonlySet<string>): StatementColumns {
  const sql = bareSql(text);
  const uses: ColumnUse[] = [];
  const inserts: StatementColumns['inserts'] = [];
  const unread: string[] = [];

  const insertAt: { at: number; table: string }[] = [];
  for (const m of sql.matchAll(new RegExp(`\\binsert\\s+into\\s+(${WORD})(?:\\s+as\\s+${WORD})?\\s*(\\()?`, 'g'))) {
    const table = m[1]!;
    insertAt.push({ at: m.index, table });
    if (!tables.has(table)) continue;
    if (!m[2]) {
      unread.push(`insert into ${table} without a column list`);
      continue;
    }
    const columns = listFrom(sql, m.index + m[0].length, /(?!)/).map((c) => c.trim());
    inserts.push({ table, columns });
    for (const column of columns) uses.push({ table, column, via: 'insert' });
  }
  const insertBefore = (at: number) => insertAt.filter((i) => i.at < at).at(-1)?.table;

  for (const m of sql.matchAll(/\bon\s+conflict\s*\(([^)]*)\)/g)) {
    const table = insertBefore(m.index);
    if (table && tables.has(table)) for (const column of m[1]!.split(',')) uses.push({ table, column: column.trim(), via: 'conflict' });
  }
  for (const m of sql.matchAll(/\bdo\s+update\s+set\s+/g)) {
    const table = insertBefore(m.index);
    if (table && tables.has(table)) for (const column of setTargets(sql, m.index + m[0].length)) uses.push({ table, column, via: 'set' });
  }
  for (const m of sql.matchAll(new RegExp(`\\bupdate\\s+(${WORD})(?:\\s+(?:as\\s+)?(?!set\\b)${WORD})?\\s+set\\s+`, 'g'))) {
    if (tables.has(m[1]!)) for (const column of setTargets(sql, m.index + m[0].length)) uses.push({ table: m[1]!, column, via: 'set' });
  }

  // Aliases: each name bound to one table of `tables` (a table's own name included) and to nothing else.
  const bound = new Map<string, Set<string>>();
  const bind = (alias: string, table: string) => bound.set(alias, (bound.get(alias) ?? new Set()).add(table));
  for (const table of tablesIn(sql)) bind(table, table);
  for (const m of sql.matchAll(new RegExp(`\\b(?:from|join|into|update)\\s+${TABLE}(?:\\s+(?:as\\s+)?(${WORD})\\b(?![.(]))?`, 'g'))) {
    if (m[2] && !NOT_ALIASES.has(m[2])) bind(m[2], m[1]!);
  }
  const derived = derivedNames(sql);
  for (const [alias, of] of bound) {
    const entityTables = [...of].filter((t) => tables.has(t));
    if (!entityTables.length) continue;
    if (of.size > 1 || derived.has(alias)) {
      unread.push(`alias ${alias}: names ${[...of, ...(derived.has(alias) ? ['a CTE or subquery'] : [])].join(' and ')}`);
      continue;
    }
    const table = entityTables[0]!;
    for (const m of sql.matchAll(new RegExp(`(?<![\\w.$])${alias}\\.(${WORD})\\b`, 'g'))) uses.push({ table, column: m[1]!, via: `alias ${alias}` });
  }
  return { uses, inserts, unread };
}
