import { parseCatalog } from '../../../src/catalog/parse-catalog.ts';
import { loadCatalog } from '../../../src/catalog/load-catalog.ts';
import type { TestApp } from '../../helpers/app.ts';

/**
 * Shared by the hardening suites: the REST fixture's ids and secrets, and an extra catalog loaded on top
 * of it with what the REST fixture lacks (a key without a practical rate limit for fuzzing, an account
 * with provider keys and webhook secrets, a tightly capped key).
 */

export const W = {
  summary: 'aaaaaaaa-0000-4000-8000-000000000001',
  typed: 'aaaaaaaa-0000-4000-8000-000000000002',
  legacy: 'aaaaaaaa-0000-4000-8000-000000000003',
  hidden: 'aaaaaaaa-0000-4000-8000-000000000004',
  noApi: 'aaaaaaaa-0000-4000-8000-000000000005',
  paused: 'aaaaaaaa-0000-4000-8000-000000000006',
  github: 'aaaaaaaa-0000-4000-8000-000000000007',
  daveSecret: 'dddddddd-0000-4000-8000-000000000001',
} as const;

export const V = {
  summaryV1: 'aaaaaaaa-0000-4000-8000-0000000000a1',
  summaryV2: 'aaaaaaaa-0000-4000-8000-0000000000a2',
  typedV1: 'aaaaaaaa-0000-4000-8000-0000000000b1',
  daveV1: 'dddddddd-0000-4000-8000-0000000000d1',
  daveV2: 'dddddddd-0000-4000-8000-0000000000d2',
} as const;

export const FUZZ_KEY = 'wr_test_fuzzer_9f3c1a7e5b';
export const DAVE_KEY = 'wr_test_dave_5e1d0c9b8a7f6e';
export const DAVE_CAPPED_KEY = 'wr_test_dave_capped_0a1b2c3d';
export const DAVE_PROVIDER_KEYS = {
  openai: 'sk-test-openai-8b1f0e3c5d7a9b2c4e6f',
  anthropic: 'sk-ant-test-3c5e7a9b1d2f4a6c8e0b',
  openrouter: 'sk-or-test-7d9f1b3c5e7a9c1e3f5b',
} as const;
/** Standard Webhooks secrets: "whsec_" + base64 of at least 16 bytes. */
export const DAVE_WEBHOOK_SECRETS = ['whsec_c2VjcmV0LXdlYmhvb2stb25lLTEyMzQ1Njc4', 'whsec_YW5vdGhlci13ZWJob29rLXNlY3JldC05ODc2NTQ='] as const;

/** Every API key secret of the REST fixture (test/fixtures/rest-catalog.yaml). */
export const REST_KEYS = [
  'wr_test_alice',
  'wr_test_bob',
  'wr_test_bob_read',
  'wr_test_bob_exec',
  'wr_test_bob_revoked',
  'wr_test_bob_expired',
  'wr_test_bob_capped',
  'wr_test_bob_slow',
  'wr_test_carol',
  'wr_test_mallory',
  'wr_test_pat',
] as const;

export const EXTRA_KEYS = [FUZZ_KEY, DAVE_KEY, DAVE_CAPPED_KEY] as const;

/** Every secret either catalog holds: none may be stored or shown in clear. */
export const ALL_CATALOG_SECRETS: readonly string[] = [
  ...REST_KEYS,
  ...EXTRA_KEYS,
  ...Object.values(DAVE_PROVIDER_KEYS),
  ...DAVE_WEBHOOK_SECRETS,
  // The signing key proper is the base64 part after "whsec_".
  ...DAVE_WEBHOOK_SECRETS.map((s) => s.slice('whsec_'.length)),
];

const EXTRA_CATALOG = `
accounts:
  - handle: fuzzer
    id: 66666666-6666-4666-8666-666666666666
    walletUsd: "100.000000"
    apiKeys:
      - { secret: ${FUZZ_KEY}, scopes: [run:execute, run:read], rateLimitPerMinute: 1000000 }
  - handle: dave
    id: 77777777-7777-4777-8777-777777777777
    walletUsd: "3.000000"
    providerKeys:
      openai: ${DAVE_PROVIDER_KEYS.openai}
      anthropic: ${DAVE_PROVIDER_KEYS.anthropic}
      openrouter: ${DAVE_PROVIDER_KEYS.openrouter}
    webhooks:
      - { url: "https://hooks.example.com/dave", secret: ${DAVE_WEBHOOK_SECRETS[0]} }
      - { url: "https://hooks.example.org/dave-failed", secret: ${DAVE_WEBHOOK_SECRETS[1]}, events: [run.failed] }
    apiKeys:
      - { secret: ${DAVE_KEY}, scopes: [run:execute, run:read], rateLimitPerMinute: 1000000 }
      - { secret: ${DAVE_CAPPED_KEY}, scopes: [run:execute, run:read], rateLimitPerMinute: 1000000, spendCap: { window: daily, usd: "0.000500" } }
workflows:
  - id: ${W.daveSecret}
    owner: dave
    name: Dave's unlisted tool
    runModel: free
    listing: unlisted
    activeVersion: v2
    versions:
      - id: ${V.daveV1}
        label: v1
        graph: { nodes: [{ id: t, kind: text.template, template: one }, { id: out, kind: output, from: t }] }
      - id: ${V.daveV2}
        label: v2
        graph: { nodes: [{ id: t, kind: text.template, template: two }, { id: out, kind: output, from: t }] }
`;

/** Loads the extra accounts and workflows into a started test app (same sealer, so secrets are sealed). */
export async function loadExtraCatalog(t: TestApp): Promise<void> {
  await loadCatalog(t.deps.orm, parseCatalog(EXTRA_CATALOG, 'hardening-extra'), { sealer: t.deps.sealer });
}

export async function countRuns(t: TestApp): Promise<number> {
  const rows = await t.deps.orm.em.fork().execute<{ n: number }[]>('select count(*)::int as n from runs');
  return Number(rows[0]!.n);
}

/** The JSON text of every row of every table of the public schema (migrations log excluded). */
export async function dumpAllTables(t: TestApp): Promise<Record<string, string>> {
  const em = t.deps.orm.em.fork();
  const tables = await em.execute<{ tablename: string }[]>(
    `select tablename from pg_tables where schemaname = 'public' and tablename not like 'mikro_orm%' order by tablename`,
  );
  const out: Record<string, string> = {};
  for (const { tablename } of tables) {
    const rows = await em.execute<{ r: unknown }[]>(`select row_to_json(x)::text as r from "${tablename}" x`);
    out[tablename] = rows.map((r) => String(r.r)).join('\n');
  }
  return out;
}

/** Header values must be byte strings: unicode travels as its UTF-8 bytes (what a raw client would send). */
export function asHeaderValue(s: string): string {
  // Control characters (but tab) are not valid in a header value; clients refuse to send them.
  return Buffer.from(s.replace(/[\x00-\x08\x0a-\x1f\x7f]/g, ' '), 'utf8').toString('latin1');
}
