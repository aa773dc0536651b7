import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { parse, stringify } from 'yaml';
import { CatalogError, canonicalGraphHash, parseCatalog } from '../../src/catalog/parse-catalog.ts';
import { loadCatalog } from '../../src/catalog/load-catalog.ts';
import { DEMO_CATALOG_FILE } from '../../src/config/config.ts';
import type { Orm } from '../../src/db/orm.ts';
import { hashApiKey, Sealer } from '../../src/security/crypto.ts';
import { getPricing } from '../../src/catalog/pricing.ts';
import { resetDb, testOrm } from '../helpers/db.ts';

const sealer = new Sealer(randomBytes(32));
const demoText = readFileSync(DEMO_CATALOG_FILE, 'utf8');
const DEMO = '00000000-0000-4000-8000-00000000a001';
const SUMMARIZE = '00000000-0000-4000-8000-00000000f002';
const SUMMARIZE_V1 = '00000000-0000-4000-8000-00000f002001';
const SUMMARIZE_V2 = '00000000-0000-4000-8000-00000f002002';

let orm: Orm;
const sql = async <T = Record<string, unknown>>(query: string, params: unknown[] = []) => orm.em.fork().execute<T[]>(query, params);

/** A small valid catalog as a plain object, to be broken in one place by each test. */
function small(): any {
  return {
    pricing: { stepUsd: '0.000100', models: { 'gpt-4o-mini': { input: '0.15', output: '0.60' } } },
    accounts: [
      {
        handle: 'alice',
        walletUsd: '10.000000',
        providerKeys: { openai: 'sk-alice-provider-secret' },
        apiKeys: [{ secret: 'wr_test_alice_secret', scopes: ['run:execute', 'run:read'], spendCap: { window: 'daily', usd: '5.00' } }],
        webhooks: [{ url: 'https://example.test/hooks', secret: 'whsec_' + Buffer.from('alice-webhook-signing-key!').toString('base64') }],
      },
      { handle: 'bob', walletUsd: 3, apiKeys: [{ secret: 'wr_test_bob_secret', scopes: ['run:read'] }] },
    ],
    workflows: [
      {
        id: '1f7e0000-0000-4000-8000-000000000001',
        owner: 'alice',
        name: 'Summarize article',
        runModel: 'per_run',
        priceUsd: '0.250000',
        activeVersion: 'v2',
        versions: [
          {
            label: 'v1',
            graph: {
              nodes: [
                { id: 't', kind: 'input.text' },
                { id: 'o', kind: 'output', from: 't' },
              ],
            },
          },
          {
            label: 'v2',
            graph: {
              nodes: [
                { id: 't', kind: 'input.textarea' },
                { id: 'o', kind: 'output', from: 't' },
              ],
            },
          },
        ],
      },
    ],
    purchases: [{ account: 'bob', workflow: '1f7e0000-0000-4000-8000-000000000001', version: 'v1' }],
    bundles: [{ account: 'bob', workflow: 'Summarize article', version: 'v1', runs: 5, usdPerRun: '0.200000' }],
  };
}

const text = (obj: unknown) => stringify(obj);

function issuesOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (e) {
    assert.instance(e, CatalogError);
    assert.is((e as CatalogError).code, 'catalog_invalid');
    return (e as CatalogError).issues;
  }
  assert.unreachable('expected a CatalogError');
  return [];
}

async function loadIssues(obj: unknown): Promise<string[]> {
  try {
    await loadCatalog(orm, parseCatalog(text(obj), 'test.yaml'), { sealer });
  } catch (e) {
    assert.instance(e, CatalogError);
    return (e as CatalogError).issues;
  }
  assert.unreachable('expected a CatalogError');
  return [];
}

function hasIssue(issues: string[], prefix: string): void {
  assert.ok(
    issues.some((i) => i.startsWith(prefix)),
    `expected an issue starting with\n  ${prefix}\ngot\n  ${issues.join('\n  ')}`,
  );
}

/** Every table of the schema but the migrations log. */
async function tableNames(): Promise<string[]> {
  const rows = await sql<{ t: string }>(`select tablename as t from pg_tables where schemaname = 'public' and tablename not like 'mikro_orm%' order by 1`);
  return rows.map((r) => r.t);
}

async function rowCounts(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const t of await tableNames()) out[t] = Number((await sql<{ n: number }>(`select count(*)::int as n from "${t}"`))[0]!.n);
  return out;
}

async function balance(accountId: string): Promise<string> {
  return String((await sql<{ b: string }>(`select balance_usd as b from wallets where account_id = ?`, [accountId]))[0]!.b);
}

test.before(async () => {
  orm = await testOrm();
});
test.before.each(async () => {
  await resetDb(orm);
});

// ------------------------------------------------------------------ bad files (path named in every message)

test('a scope outside run:execute and run:read is rejected at its path', () => {
  const c = small();
  c.accounts[0].apiKeys.push({ secret: 'wr_second_key_x', scopes: ['run:read', 'admin'] });
  hasIssue(
    issuesOf(() => parseCatalog(text(c), 'x')),
    'accounts[0].apiKeys[1].scopes[1]: must be one of "run:execute", "run:read"',
  );
});

test('an amount with more than six decimals or a negative amount is rejected', () => {
  const c = small();
  c.workflows[0].priceUsd = '0.2500001';
  c.accounts[1].walletUsd = '-1';
  const issues = issuesOf(() => parseCatalog(text(c), 'x'));
  hasIssue(issues, 'workflows[0].priceUsd: has more than 6 decimal places');
  hasIssue(issues, 'accounts[1].walletUsd: must not be negative');
});

test('an amount that is not a number is rejected', () => {
  const c = small();
  c.bundles[0].usdPerRun = 'twenty cents';
  hasIssue(
    issuesOf(() => parseCatalog(text(c), 'x')),
    'bundles[0].usdPerRun: "twenty cents" is not a decimal amount',
  );
});

test('unknown fields are errors at the top level and inside objects', () => {
  const c = small();
  c.accountz = [];
  c.accounts[0].apiKeys[0].rateLimit = 10;
  c.workflows[0].versions[0].grpah = {};
  const issues = issuesOf(() => parseCatalog(text(c), 'x'));
  hasIssue(issues, 'accountz: unknown field');
  hasIssue(issues, 'accounts[0].apiKeys[0].rateLimit: unknown field');
  hasIssue(issues, 'workflows[0].versions[0].grpah: unknown field');
});

test('a missing required field is named', () => {
  const c = small();
  delete c.workflows[0].runModel;
  delete c.accounts[1].handle;
  const issues = issuesOf(() => parseCatalog(text(c), 'x'));
  hasIssue(issues, 'workflows[0].runModel: is required');
  hasIssue(issues, 'accounts[1].handle: is required');
});

test('an invalid enum value is rejected with the allowed values', () => {
  const c = small();
  c.workflows[0].listing = 'private';
  c.workflows[0].credentialMode = 'own_key';
  c.accounts[0].apiKeys[0].spendCap.window = 'weekly';
  const issues = issuesOf(() => parseCatalog(text(c), 'x'));
  hasIssue(issues, 'workflows[0].listing: must be one of "public", "unlisted", "none"');
  hasIssue(issues, 'workflows[0].credentialMode: must be one of');
  hasIssue(issues, 'accounts[0].apiKeys[0].spendCap.window: must be one of "daily", "monthly", "lifetime"');
});

test('a bad graph is reported with the node path inside the catalog', () => {
  const c = small();
  c.workflows[0].versions[1].graph.nodes.push({ id: 'x', kind: 'llm.chatt' });
  hasIssue(
    issuesOf(() => parseCatalog(text(c), 'x')),
    'workflows[0].versions[1].graph.nodes[2].kind: unknown kind "llm.chatt"',
  );
});

test('a password input echoed by an output is refused at load', () => {
  const c = small();
  c.workflows[0].versions[0].graph.nodes[0].kind = 'input.password';
  hasIssue(
    issuesOf(() => parseCatalog(text(c), 'x')),
    'workflows[0].versions[0].graph.nodes[1].from: password input "t" cannot be used by output',
  );
});

test('an active version that is not one of the labels is rejected', async () => {
  const c = small();
  c.workflows[0].activeVersion = 'v3';
  hasIssue(await loadIssues(c), 'workflows[0].activeVersion: "v3" is not a version of this workflow');
});

test('duplicate handles, labels and API key secrets are rejected', () => {
  const c = small();
  c.accounts[1].handle = 'alice';
  c.accounts[1].apiKeys[0].secret = 'wr_test_alice_secret';
  c.workflows[0].versions[1].label = 'v1';
  const issues = issuesOf(() => parseCatalog(text(c), 'x'));
  hasIssue(issues, 'accounts[1].handle: duplicate handle "alice"');
  hasIssue(issues, 'accounts[1].apiKeys[0].secret: duplicate API key secret (also accounts[0].apiKeys[0])');
  hasIssue(issues, 'workflows[0].versions[1].label: duplicate label "v1"');
});

test('a workflow owner that is neither in the file nor in the database is rejected', async () => {
  const c = small();
  c.workflows[0].owner = 'carol';
  hasIssue(await loadIssues(c), 'workflows[0].owner: unknown account "carol"');
});

test('purchases and bundles must name an existing account, workflow and version', async () => {
  const c = small();
  c.purchases[0].version = 'v9';
  c.bundles[0].account = 'dave';
  c.bundles.push({ account: 'bob', workflow: '9999aaaa-0000-4000-8000-000000000000', version: 'v1', runs: 1, usdPerRun: 1 });
  const issues = await loadIssues(c);
  hasIssue(issues, 'purchases[0].version: unknown version "v9"');
  hasIssue(issues, 'bundles[0].account: unknown account "dave"');
  hasIssue(issues, 'bundles[1].workflow: unknown workflow 9999aaaa-0000-4000-8000-000000000000');
});

test('malformed ids, webhook secrets, URLs and dates are rejected at their paths', () => {
  const c = small();
  c.accounts[0].id = 'not-a-uuid';
  c.accounts[0].webhooks[0].secret = 'plain-secret';
  c.accounts[0].webhooks.push({ url: 'ftp://example.test/x', secret: c.accounts[0].webhooks[0].secret });
  c.accounts[0].apiKeys[0].expiresAt = 'next tuesday';
  c.accounts[0].providerKeys.openia = 'sk-x';
  const issues = issuesOf(() => parseCatalog(text(c), 'x'));
  hasIssue(issues, 'accounts[0].id: must be a UUID');
  hasIssue(issues, 'accounts[0].webhooks[0].secret: must be a Standard Webhooks secret');
  hasIssue(issues, 'accounts[0].webhooks[1].url: must be an absolute http(s) URL');
  hasIssue(issues, 'accounts[0].apiKeys[0].expiresAt: must be an ISO 8601 date-time');
  hasIssue(issues, 'accounts[0].providerKeys.openia: unknown provider');
});

test('a free workflow with a creator price is rejected', () => {
  const c = small();
  c.workflows[0].runModel = 'free';
  hasIssue(
    issuesOf(() => parseCatalog(text(c), 'x')),
    'workflows[0].priceUsd: a free workflow has no creator price',
  );
});

test('text that is not YAML is rejected without a stack of zod noise', () => {
  const issues = issuesOf(() => parseCatalog('accounts: [\n  - handle: a\n', 'broken.yaml'));
  assert.is(issues.length, 1);
  assert.match(issues[0]!, /^\(root\): not valid YAML/);
});

// ------------------------------------------------------------------ the demo catalog

test('the demo catalog validates and loads every workflow, key, pin and bundle', async () => {
  const catalog = parseCatalog(demoText, 'demo.yaml');
  const report = await loadCatalog(orm, catalog, { sealer });
  assert.is(report.accounts.created, 2);
  assert.is(report.workflows.created, 7);
  assert.is(report.versions.created, 8);
  assert.is(report.apiKeys.created, 3);
  assert.is(report.purchases.created, 1);
  assert.is(report.bundles.created, 1);
  assert.is(report.updated, 0);
  assert.is(await balance(DEMO), '25.000000');
  const ledger = await sql(`select kind, amount_usd, balance_after_usd from ledger_entries where account_id = ?`, [DEMO]);
  assert.equal(
    ledger.map((r) => [r.kind, String(r.amount_usd), String(r.balance_after_usd)]),
    [['credit', '25.000000', '25.000000']],
  );

  const keys = await sql(`select scopes from api_keys where key_hash = ?`, [hashApiKey('wr_demo_key')]);
  assert.equal(keys[0]!.scopes, ['run:execute', 'run:read']);
  const ro = await sql(`select scopes, account_id from api_keys where key_hash = ?`, [hashApiKey('wr_demo_readonly')]);
  assert.equal(ro[0]!.scopes, ['run:read']);
  assert.is(ro[0]!.account_id, DEMO);

  const wf = await sql(`select active_version_id, price_usd from workflows where id = ?`, [SUMMARIZE]);
  assert.is(wf[0]!.active_version_id, SUMMARIZE_V2);
  const pin = await sql(`select version_id from purchases where account_id = ? and workflow_id = ?`, [DEMO, SUMMARIZE]);
  assert.is(pin[0]!.version_id, SUMMARIZE_V1);
  const bundle = await sql(`select runs_left, usd_per_run from bundles where account_id = ?`, [DEMO]);
  assert.equal([Number(bundle[0]!.runs_left), String(bundle[0]!.usd_per_run)], [5, '0.040000']);

  // every node kind and both credential modes are on show
  const graphs = (await sql<{ graph: { nodes: { kind: string }[] } }>(`select graph from workflow_versions`)).flatMap((r) => r.graph.nodes.map((n) => n.kind));
  for (const kind of [
    'input.text',
    'input.password',
    'input.number',
    'input.textarea',
    'input.url',
    'input.file',
    'input.json',
    'input.dropdown',
    'text.template',
    'llm.chat',
    'json.parse',
    'http.request',
    'delay',
    'condition',
    'output',
  ]) {
    assert.ok(graphs.includes(kind), `demo catalog lacks ${kind}`);
  }
  const modes = (await sql<{ m: string }>(`select distinct credential_mode as m from workflows order by 1`)).map((r) => r.m);
  assert.equal(modes, ['byok', 'service_hosted']);

  const pricing = await getPricing(orm.em.fork() as never);
  assert.is(pricing.stepUsd, '0.000100');
  assert.equal(pricing.models['gpt-4o-mini'], { input: '0.150000', output: '0.600000' });
});

test('loading the same catalog twice changes nothing the second time', async () => {
  await loadCatalog(orm, parseCatalog(demoText, 'demo.yaml'), { sealer });
  const before = await rowCounts();
  const snapshot = await sql(`select row_to_json(w)::text as j from workflows w order by id`);
  const report = await loadCatalog(orm, parseCatalog(demoText, 'demo.yaml'), { sealer });
  assert.is(report.created, 0);
  assert.is(report.updated, 0);
  assert.is(report.pricingUpdated, false);
  assert.ok(report.unchanged > 0);
  assert.equal(await rowCounts(), before);
  assert.equal(await sql(`select row_to_json(w)::text as j from workflows w order by id`), snapshot);
  assert.is(await balance(DEMO), '25.000000');
});

test("a load writes its pricing when the stored pricing changed behind this process's pricing cache", async () => {
  await loadCatalog(orm, parseCatalog(text(small()), 'x'), { sealer });
  assert.equal((await getPricing(orm.em.fork() as never)).models['gpt-4o-mini'], { input: '0.150000', output: '0.600000' }); // now cached
  await sql(`delete from settings where key = 'pricing'`); // another process, or a reset of the database
  const report = await loadCatalog(orm, parseCatalog(text(small()), 'x'), { sealer });
  assert.is(report.pricingUpdated, true);
  const [row] = await sql<{ value: unknown }>(`select value from settings where key = 'pricing'`);
  assert.ok(row, 'the pricing is stored again');
});

test('a reload never resets wallet balances, bundle runs left or purchase pins', async () => {
  const c = small();
  await loadCatalog(orm, parseCatalog(text(c), 'x'), { sealer });
  const [alice] = await sql<{ id: string }>(`select id from accounts where handle = 'alice'`);
  const [bob] = await sql<{ id: string }>(`select id from accounts where handle = 'bob'`);
  const wf = c.workflows[0].id as string;
  const [v2] = await sql<{ id: string }>(`select id from workflow_versions where workflow_id = ? and label = 'v2'`, [wf]);
  // The service spends money, consumes bundle runs and moves the pin (accept-update).
  await sql(`update wallets set balance_usd = 7.5 where account_id = ?`, [alice!.id]);
  await sql(`update bundles set runs_left = 2 where account_id = ?`, [bob!.id]);
  await sql(`update purchases set version_id = ? where account_id = ?`, [v2!.id, bob!.id]);
  const ledgerBefore = (await rowCounts()).ledger_entries;

  c.accounts[0].walletUsd = '99.000000';
  c.accounts[1].walletUsd = '50';
  c.bundles[0].runs = 20;
  c.bundles[0].usdPerRun = '0.100000';
  const report = await loadCatalog(orm, parseCatalog(text(c), 'x'), { sealer });
  assert.is(report.created, 0);
  assert.is(await balance(alice!.id), '7.500000');
  assert.is(await balance(bob!.id), '3.000000');
  const [bundle] = await sql(`select runs_left, runs_total, usd_per_run from bundles where account_id = ?`, [bob!.id]);
  assert.equal([Number(bundle!.runs_left), Number(bundle!.runs_total), String(bundle!.usd_per_run)], [2, 5, '0.200000']);
  const [pin] = await sql(`select version_id from purchases where account_id = ?`, [bob!.id]);
  assert.is(pin!.version_id, v2!.id);
  assert.is((await rowCounts()).ledger_entries, ledgerBefore);
});

test('a changed graph for an existing version is refused and nothing else is written', async () => {
  const c = small();
  await loadCatalog(orm, parseCatalog(text(c), 'x'), { sealer });
  const before = await rowCounts();
  c.workflows[0].name = 'Renamed in the same file';
  c.bundles[0].workflow = c.workflows[0].id;
  c.accounts.push({ handle: 'newcomer', walletUsd: '1' });
  c.workflows[0].versions[1].graph.nodes[0].kind = 'input.text';
  const issues = await loadIssues(c);
  assert.equal(issues, ['workflows[0].versions[1].graph: version v2 already exists with a different graph; versions are immutable']);
  assert.equal(await rowCounts(), before);
  const [wf] = await sql(`select name from workflows where id = ?`, [c.workflows[0].id]);
  assert.is(wf!.name, 'Summarize article');
});

test('reordering keys of a stored graph is not a change', async () => {
  const c = small();
  await loadCatalog(orm, parseCatalog(text(c), 'x'), { sealer });
  c.workflows[0].versions[0].graph = {
    nodes: [
      { kind: 'input.text', id: 't' },
      { from: 't', kind: 'output', id: 'o' },
    ],
  };
  const report = await loadCatalog(orm, parseCatalog(text(c), 'x'), { sealer });
  assert.is(report.versions.unchanged, 2);
  assert.is(canonicalGraphHash({ nodes: [{ id: 'a', kind: 'x' }] }), canonicalGraphHash({ nodes: [{ kind: 'x', id: 'a' }] }));
});

test('a version id reused with another label or by another workflow is refused', async () => {
  const c = small();
  c.workflows[0].versions[0].id = 'aaaa0000-0000-4000-8000-000000000001';
  await loadCatalog(orm, parseCatalog(text(c), 'x'), { sealer });
  c.workflows[0].versions[0].label = 'v1b';
  hasIssue(await loadIssues(c), 'workflows[0].versions[0].label: version aaaa0000-0000-4000-8000-000000000001 already exists with label "v1"');
});

test('names, descriptions, prices, listing flags, active version and key settings update on reload', async () => {
  const c = small();
  await loadCatalog(orm, parseCatalog(text(c), 'x'), { sealer });
  c.workflows[0].name = 'Summarize anything';
  c.bundles[0].workflow = c.workflows[0].id; // the name moved on; the id did not
  c.workflows[0].description = 'now with a description';
  c.workflows[0].priceUsd = 0.3;
  c.workflows[0].listing = 'unlisted';
  c.workflows[0].activeVersion = 'v1';
  c.workflows[0].versions.push({
    label: 'v3',
    graph: {
      nodes: [
        { id: 'n', kind: 'input.number' },
        { id: 'o', kind: 'output', from: 'n' },
      ],
    },
  });
  c.accounts[0].listingsPaused = true;
  c.accounts[0].apiKeys[0] = { secret: 'wr_test_alice_secret', scopes: ['run:read'], rateLimitPerMinute: 5, revoked: true, expiresAt: '2031-01-02T03:04:05Z' };
  c.pricing.stepUsd = '0.000200';
  const report = await loadCatalog(orm, parseCatalog(text(c), 'x'), { sealer });
  assert.is(report.workflows.updated, 1);
  assert.is(report.versions.created, 1);
  assert.is(report.accounts.updated, 1);
  assert.is(report.apiKeys.updated, 1);
  assert.is(report.pricingUpdated, true);

  const [wf] = await sql(`select * from workflows where id = ?`, [c.workflows[0].id]);
  assert.is(wf!.name, 'Summarize anything');
  assert.is(wf!.description, 'now with a description');
  assert.is(String(wf!.price_usd), '0.300000');
  assert.is(wf!.listing, 'unlisted');
  const [v1] = await sql(`select id from workflow_versions where workflow_id = ? and label = 'v1'`, [c.workflows[0].id]);
  assert.is(wf!.active_version_id, v1!.id);
  const [acct] = await sql(`select listings_paused from accounts where handle = 'alice'`);
  assert.is(acct!.listings_paused, true);
  const [key] = await sql(`select scopes, rate_limit_per_minute, revoked, spend_cap_window, expires_at from api_keys where key_hash = ?`, [
    hashApiKey('wr_test_alice_secret'),
  ]);
  assert.equal(key!.scopes, ['run:read']);
  assert.is(Number(key!.rate_limit_per_minute), 5);
  assert.is(key!.revoked, true);
  assert.is(key!.spend_cap_window, null);
  assert.is(new Date(String(key!.expires_at).replace(' ', 'T').replace(/\+00$/, 'Z')).toISOString(), '2031-01-02T03:04:05.000Z');
  assert.is((await getPricing(orm.em.fork() as never)).stepUsd, '0.000200');
});

test('a workflow without an id is found again by owner and name', async () => {
  const c = small();
  delete c.workflows[0].id;
  c.purchases = [];
  c.bundles = [];
  await loadCatalog(orm, parseCatalog(text(c), 'x'), { sealer });
  c.workflows[0].priceUsd = '1';
  const report = await loadCatalog(orm, parseCatalog(text(c), 'x'), { sealer });
  assert.equal([report.workflows.created, report.workflows.updated], [0, 1]);
  assert.is((await rowCounts()).workflows, 1);
});

test('secrets are stored only as hashes or sealed, never in the clear', async () => {
  const c = small();
  c.accounts[0].providerKeys.anthropic = 'sk-ant-very-secret-value';
  await loadCatalog(orm, parseCatalog(text(c), 'x'), { sealer });
  await loadCatalog(orm, parseCatalog(demoText, 'demo.yaml'), { sealer });
  const secrets = [
    'wr_test_alice_secret',
    'wr_test_bob_secret',
    'sk-alice-provider-secret',
    'sk-ant-very-secret-value',
    c.accounts[0].webhooks[0].secret as string,
    (c.accounts[0].webhooks[0].secret as string).slice('whsec_'.length),
    'wr_demo_key',
    'wr_demo_readonly',
    'wr_acme_key',
  ];
  let rows = 0;
  for (const t of await tableNames()) {
    for (const r of await sql<{ j: string }>(`select row_to_json(x)::text as j from "${t}" x`)) {
      rows++;
      for (const s of secrets) assert.not.ok(r.j.includes(s), `${t} holds ${s} in the clear: ${r.j}`);
    }
  }
  assert.ok(rows > 20);
  const [pk] = await sql<{ ciphertext: string }>(`select ciphertext from provider_keys where provider = 'openai'`);
  assert.is(sealer.open(pk!.ciphertext), 'sk-alice-provider-secret');
  const [hook] = await sql<{ secret_ciphertext: string }>(`select secret_ciphertext from webhook_endpoints`);
  assert.is(sealer.open(hook!.secret_ciphertext), c.accounts[0].webhooks[0].secret);
});

test('a changed provider key or webhook secret is resealed, an unchanged one is left alone', async () => {
  const c = small();
  await loadCatalog(orm, parseCatalog(text(c), 'x'), { sealer });
  const [before] = await sql<{ ciphertext: string }>(`select ciphertext from provider_keys`);
  let report = await loadCatalog(orm, parseCatalog(text(c), 'x'), { sealer });
  assert.equal([report.providerKeys.unchanged, report.webhooks.unchanged], [1, 1]);
  const [same] = await sql<{ ciphertext: string }>(`select ciphertext from provider_keys`);
  assert.is(same!.ciphertext, before!.ciphertext);
  c.accounts[0].providerKeys.openai = 'sk-rotated';
  c.accounts[0].webhooks[0].events = ['run.failed'];
  report = await loadCatalog(orm, parseCatalog(text(c), 'x'), { sealer });
  assert.equal([report.providerKeys.updated, report.webhooks.updated], [1, 1]);
  const [after] = await sql<{ ciphertext: string }>(`select ciphertext from provider_keys`);
  assert.is(sealer.open(after!.ciphertext), 'sk-rotated');
  const [hook] = await sql(`select events from webhook_endpoints`);
  assert.equal(hook!.events, ['run.failed']);
});

test('an API key secret already used by another account is refused', async () => {
  const c = small();
  await loadCatalog(orm, parseCatalog(text(c), 'x'), { sealer });
  const d = small();
  d.accounts[1].apiKeys[0].secret = 'wr_test_alice_secret';
  d.accounts[0].apiKeys = [];
  hasIssue(await loadIssues(d), 'accounts[1].apiKeys[0].secret: this API key already belongs to another account');
});

test('JSON is accepted as well as YAML', () => {
  const catalog = parseCatalog(JSON.stringify(parse(demoText)), 'demo.json');
  assert.is(catalog.workflows.length, 7);
  assert.is(catalog.accounts[0]!.walletUsd, '25.000000');
});

test.run();
