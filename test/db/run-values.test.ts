import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  CREDENTIAL_MODES,
  LEDGER_KINDS,
  LISTINGS,
  RUN_MODELS,
  RUN_SECRET_KINDS,
  SPEND_WINDOWS,
  USER_ACCESS,
  WEBHOOK_DELIVERY_STATUSES,
} from '../../src/db/entities/index.ts';
import { BILLING_STATUSES, OUTCOMES, RUN_PHASES, RUN_STATUSES } from '../../src/domain/run-status.ts';
import { resetDb, testOrm } from '../helpers/db.ts';

/**
 * The migrations spell the allowed values and the partial indexes' predicates as literals (they are
 * history). Read back from the live database (PGlite, or the server of DATABASE_URL), the domains'
 * and tables' CHECK constraints must allow exactly the typed lists of src/domain/run-status.ts and the
 * entities, and the partial indexes of `runs` may compare status and phase only with their values.
 */

/** Each CHECK constraint of the schema, keyed `domain` or `table.column`, with the values it allows. */
const EXPECTED_CHECKS: Record<string, readonly string[]> = {
  runs_status: RUN_STATUSES,
  runs_outcome: OUTCOMES,
  runs_billing_status: BILLING_STATUSES,
  runs_user_access: USER_ACCESS,
  runs_credential_mode: CREDENTIAL_MODES,
  'api_keys.spend_cap_window': SPEND_WINDOWS,
  'ledger_entries.kind': LEDGER_KINDS,
  'run_secrets.kind': RUN_SECRET_KINDS,
  'webhook_deliveries.status': WEBHOOK_DELIVERY_STATUSES,
  'workflows.listing': LISTINGS,
  'workflows.run_model': RUN_MODELS,
  'workflows.credential_mode': CREDENTIAL_MODES,
};

/** The columns a partial index of `runs` may compare with a literal, and the values it may use. */
const PREDICATE_VALUES: Record<string, readonly string[]> = {
  status: RUN_STATUSES,
  phase: RUN_PHASES,
  engine: ['embedded', 'temporal'],
};

const CHECKS = `select coalesce(t.typname, r.relname) as owner, t.typname is not null as is_domain, pg_get_constraintdef(c.oid) as definition
  from pg_constraint c
  left join pg_type t on t.oid = c.contypid and t.typnamespace = 'public'::regnamespace
  left join pg_class r on r.oid = c.conrelid and r.relnamespace = 'public'::regnamespace
 where c.contype = 'c' and (t.oid is not null or r.oid is not null)`;
const PARTIAL_INDEXES = `select c.relname as index, pg_get_expr(i.indpred, i.indrelid) as predicate
  from pg_index i join pg_class c on c.oid = i.indexrelid
 where i.indrelid = 'public.runs'::regclass and i.indpred is not null`;

const literals = (text: string): string[] => [...text.matchAll(/'([^']*)'/g)].map((match) => match[1]!);

/**
 * The literals a deparsed predicate compares each column with, e.g. `((status)::text = 'pending'::text)`
 * or `((phase)::text = ANY (ARRAY[('starting'::character varying)::text, …]))`; and every literal of it,
 * so that one compared some other way is noticed rather than skipped.
 */
function comparisons(predicate: string): { byColumn: Map<string, string[]>; all: string[] } {
  const byColumn = new Map<string, string[]>();
  const comparison = /\(?(\w+)\)?(?:::[\w ]+)?\s*(?:=|<>)\s*(ANY \(\(?ARRAY\[[^\]]*\]|'[^']*')/g;
  for (const match of predicate.matchAll(comparison)) {
    byColumn.set(match[1]!, [...(byColumn.get(match[1]!) ?? []), ...literals(match[2]!)]);
  }
  return { byColumn, all: literals(predicate) };
}

test.before(async () => {
  await resetDb(await testOrm());
});

test('every CHECK constraint allows exactly its typed list of values', async () => {
  const rows = await (await testOrm()).em.fork().execute<{ owner: string; is_domain: boolean; definition: string }[]>(CHECKS);
  const found: Record<string, string[]> = {};
  for (const row of rows) {
    const column = row.is_domain ? null : /^CHECK \(\(\(?(\w+)/.exec(row.definition)?.[1];
    found[column ? `${row.owner}.${column}` : row.owner] = literals(row.definition);
  }
  assert.equal(Object.keys(found).sort(), Object.keys(EXPECTED_CHECKS).sort(), 'each CHECK constraint of the schema has its typed list here');
  for (const [owner, values] of Object.entries(EXPECTED_CHECKS)) {
    assert.equal([...found[owner]!].sort(), [...values].sort(), `${owner} allows exactly its typed values`);
  }
});

test('the partial indexes of runs compare status and phase only with their typed values', async () => {
  const rows = await (await testOrm()).em.fork().execute<{ index: string; predicate: string }[]>(PARTIAL_INDEXES);
  const seen = new Set<string>();
  for (const { index, predicate } of rows) {
    const { byColumn, all } = comparisons(predicate);
    const attributed = [...byColumn.values()].flat();
    assert.equal(attributed.length, all.length, `${index}: every literal is compared with a known column: ${predicate}`);
    for (const [column, values] of byColumn) {
      const allowed = PREDICATE_VALUES[column];
      assert.ok(allowed, `${index}: compares ${column} with a literal: ${predicate}`);
      for (const value of values) {
        assert.ok(allowed.includes(value), `${index}: '${value}' is not a value of ${column}: ${predicate}`);
        seen.add(`${column}=${value}`);
      }
    }
  }
  // The predicates were read and parsed: the queue's and the in-flight index's values are all there.
  for (const expected of ['status=pending', 'status=running', 'status=suspended', 'phase=queued', 'phase=starting', 'phase=preparing']) {
    assert.ok(seen.has(expected), `some partial index compares ${expected}`);
  }
});

test('the reading of a predicate notices a value that is not a phase', () => {
  const { byColumn, all } = comparisons("(((status)::text = 'pending'::text) AND ((phase)::text = ANY (ARRAY['settling'::text])))");
  assert.equal(byColumn.get('phase'), ['settling']);
  assert.equal(all.length, 2);
  assert.not.ok(RUN_PHASES.includes('settling' as never));
});

test.run();
