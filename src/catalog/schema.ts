import { z } from 'zod';
import { MAX_CONCURRENCY_LIMIT } from '../domain/run-flow-control.ts';
import { CREDENTIAL_MODES, LISTINGS, RUN_BUDGET_PER_MINUTE, RUN_MODELS, SPEND_WINDOWS } from '../db/entities/index.ts';
import type { Graph } from '../domain/graph/types.ts';
import { PROVIDERS } from '../domain/graph/types.ts';
import { validateGraph } from '../domain/graph/validate.ts';
import { toDb, usd } from '../domain/money.ts';
import { UUID } from '../domain/ids.ts';

/**
 * The catalog file (docs/design/catalog.md): its schema and the checks that need only the file itself. Checks that
 * need the database (does the owner exist? is this version already stored with another graph?) are in
 * load-catalog.ts.
 *
 * Keys of the upsert (how a reload finds "the same" row):
 * - accounts: `id` when given, else `handle`; an account found by id whose handle changed is renamed;
 * - API keys: sha256 of `secret` (the secret is never stored); provider keys: (account, provider);
 *   webhooks: (account, url);
 * - workflows: `id` when given, else (owner handle, name) — so a workflow without an id that is renamed
 *   in the file becomes a new workflow; give ids to anything you intend to rename;
 * - versions: `id` when given, else (workflow, label); versions are immutable (same key + another graph
 *   is an error);
 * - purchases: (account, workflow); bundles: (account, workflow, version).
 * Ids left out are generated (random UUIDs) when the row is first created.
 *
 * Every object is strict: an unknown field is an error, so a typo never silently does nothing.
 * Amounts are decimal strings or JSON numbers, non-negative, at most 6 decimals, below 10^12; they come
 * out of the schema as canonical 6-place strings ("0.250000").
 */

const SCOPES = ['run:execute', 'run:read'] as const;
const WEBHOOK_EVENTS = ['run.completed', 'run.failed', 'run.cancelled'] as const;
const HANDLE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const LABEL = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** A USD amount → canonical 6-place string. */
const amount = z.unknown().transform((v, ctx): string => {
  const fail = (message: string) => {
    ctx.addIssue({ code: 'custom', message });
    return z.NEVER;
  };
  if (v === undefined || v === null) return fail('is required');
  let d;
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) return fail('must be a finite amount');
    d = usd(v);
  } else if (typeof v === 'string') {
    const t = v.trim();
    if (!/^-?\d+(\.\d+)?$/.test(t)) return fail(`${JSON.stringify(v)} is not a decimal amount (write e.g. "0.250000")`);
    d = usd(t);
  } else return fail('must be a decimal string or a number');
  if (d.isNegative() && !d.isZero()) return fail('must not be negative');
  if (d.decimalPlaces() > 6) return fail('has more than 6 decimal places');
  if (d.greaterThanOrEqualTo('1e12')) return fail('is too large');
  return toDb(d);
});

/** ISO 8601 date or date-time (with offset) → Date; YAML timestamps may also arrive as Date objects. */
const instant = z.unknown().transform((v, ctx): Date => {
  const isoText = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2}))?$/;
  const d = v instanceof Date ? v : typeof v === 'string' && isoText.test(v.trim()) ? new Date(v.trim()) : null;
  if (!d || Number.isNaN(d.getTime())) {
    ctx.addIssue({ code: 'custom', message: 'must be an ISO 8601 date-time with a timezone, e.g. "2030-01-01T00:00:00Z"' });
    return z.NEVER;
  }
  return d;
});

const handle = z.string().regex(HANDLE, 'must be 1-64 letters, digits, "_", "-" or "." (starting with a letter or digit)');
const id = z
  .string()
  .regex(UUID, 'must be a UUID')
  .transform((s) => s.toLowerCase());
const nonEmpty = z.string().trim().min(1, 'must not be empty');

const whsecSecret = z
  .string()
  .regex(/^whsec_[A-Za-z0-9+/]+={0,2}$/, 'must be a Standard Webhooks secret: "whsec_" followed by base64')
  .refine((s) => Buffer.from(s.slice('whsec_'.length), 'base64').length >= 16, 'must encode at least 16 bytes after "whsec_"');

const apiKeySchema = z.strictObject({
  secret: z.string().min(8, 'must be at least 8 characters').max(256).regex(/^\S+$/, 'must not contain whitespace'),
  scopes: z
    .array(z.enum(SCOPES))
    .min(1, 'must name at least one scope')
    .transform((s) => [...new Set(s)]),
  rateLimitPerMinute: z.number().int().min(1).max(1_000_000).default(60),
  /** Runs a minute the key's batches may start (docs/design/batch-runs.md#run-budget). */
  runBudgetPerMinute: z.number().int().min(1).max(1_000_000).default(RUN_BUDGET_PER_MINUTE),
  spendCap: z
    .strictObject({ window: z.enum(SPEND_WINDOWS), usd: amount })
    .nullable()
    .default(null),
  /** Whether the key may start runs of high priority (docs/design/flow-control.md). */
  highPriority: z.boolean().default(false),
  /** Runs of one concurrency key in flight at once (a request may lower it), or null: no bound. */
  maxConcurrentPerConcurrencyKey: z.number().int().min(1).max(MAX_CONCURRENCY_LIMIT).nullable().default(null),
  expiresAt: instant.nullable().default(null),
  revoked: z.boolean().default(false),
});

const webhookSchema = z.strictObject({
  url: z.url({ protocol: /^https?$/, error: 'must be an absolute http(s) URL' }),
  secret: whsecSecret,
  /** null or absent: every terminal event. */
  events: z
    .array(z.enum(WEBHOOK_EVENTS))
    .min(1)
    .transform((s) => [...new Set(s)])
    .nullable()
    .default(null),
});

const accountSchema = z.strictObject({
  handle,
  id: id.optional(),
  walletUsd: amount.default('0.000000'),
  restricted: z.boolean().default(false),
  listingsPaused: z.boolean().default(false),
  maxConcurrentRuns: z.number().int().min(1).nullable().default(null),
  providerKeys: z.partialRecord(z.enum(PROVIDERS), nonEmpty).default({}),
  connections: z
    .array(z.string().regex(/^[A-Za-z0-9_.-]+$/, 'must be a provider id (letters, digits, "_", "-", ".")'))
    .transform((s) => [...new Set(s)])
    .default([]),
  apiKeys: z.array(apiKeySchema).default([]),
  webhooks: z.array(webhookSchema).default([]),
});

const versionSchema = z.strictObject({
  id: id.optional(),
  label: z.string().regex(LABEL, 'must be 1-64 letters, digits, "_", "-" or "."'),
  /** Checked by validateGraph (checkCatalog), which reports precise node paths. */
  graph: z.unknown().transform((g) => g as Graph),
});

const workflowSchema = z.strictObject({
  id: id.optional(),
  owner: handle,
  name: nonEmpty.max(200),
  description: z.string().nullable().default(null),
  serviceCode: z.string().min(1).max(255).nullable().default(null),
  runModel: z.enum(RUN_MODELS),
  priceUsd: amount.default('0.000000'),
  listing: z.enum(LISTINGS).default('public'),
  unlock: z.boolean().default(false),
  apiAccess: z.boolean().default(true),
  credentialMode: z.enum(CREDENTIAL_MODES).default('service_hosted'),
  computeLimitUsd: amount.nullable().default(null),
  /** A label of `versions` (or of a version already stored); defaults to the last version listed. */
  activeVersion: z.string().regex(LABEL, 'must be a version label').optional(),
  versions: z.array(versionSchema).min(1, 'must list at least one version'),
});

/** `workflow` is a workflow id, or the name of a workflow in this file; `version` a label or an id. */
const workflowRef = z.string().min(1);
const purchaseSchema = z.strictObject({ account: handle, workflow: workflowRef, version: z.string().min(1) });
const bundleSchema = z.strictObject({
  account: handle,
  workflow: workflowRef,
  version: z.string().min(1),
  runs: z.number().int().min(1).max(1_000_000),
  usdPerRun: amount,
});

const pricingSchema = z.strictObject({
  stepUsd: amount.default('0.000100'),
  models: z.record(nonEmpty, z.strictObject({ input: amount, output: amount })).default({}),
});

export const catalogSchema = z.strictObject({
  /** Absent: the stored pricing is left as it is (the service default until a catalog sets one). */
  pricing: pricingSchema.optional(),
  accounts: z.array(accountSchema).default([]),
  workflows: z.array(workflowSchema).default([]),
  purchases: z.array(purchaseSchema).default([]),
  bundles: z.array(bundleSchema).default([]),
});

export type Catalog = z.output<typeof catalogSchema> & {
  /** Where the catalog came from (file name), for messages. */
  source?: string;
};
export type CatalogAccount = Catalog['accounts'][number];
export type CatalogWorkflow = Catalog['workflows'][number];
export type CatalogApiKey = CatalogAccount['apiKeys'][number];

/** `['accounts', 0, 'apiKeys', 1]` → `accounts[0].apiKeys[1]`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) {
    if (typeof p === 'number') out += `[${p}]`;
    else {
      const key = String(p);
      out += /^[A-Za-z_$][\w$-]*$/.test(key) ? (out ? `.${key}` : key) : `[${JSON.stringify(key)}]`;
    }
  }
  return out || '(root)';
}

/** zod issues as `path: message` lines, one per unknown key. */
export function formatIssues(error: z.ZodError): string[] {
  const lines: string[] = [];
  for (const issue of error.issues) {
    if (issue.code === 'unrecognized_keys') {
      const what = issue.path[issue.path.length - 1] === 'providerKeys' ? `unknown provider; expected one of ${PROVIDERS.join(', ')}` : 'unknown field';
      for (const key of issue.keys) lines.push(`${formatPath([...issue.path, key])}: ${what}`);
      continue;
    }
    let message = issue.message;
    const missing =
      ('input' in issue && issue.input === undefined && issue.code !== 'custom') || (issue.code === 'invalid_type' && /received undefined$/.test(message));
    if (missing) message = 'is required';
    else if (issue.code === 'invalid_type') {
      const received = /received (\w+)$/.exec(message);
      message = `must be ${article(issue.expected)}${received ? ` (got ${received[1]})` : ''}`;
    } else if (issue.code === 'invalid_value') message = `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
    else if (issue.code === 'invalid_key') {
      const reasons = issue.issues.map((i) => (i.code === 'invalid_value' ? `expected one of ${i.values.join(', ')}` : i.message));
      message = `unknown key; ${reasons.join('; ')}`;
    }
    lines.push(`${formatPath(issue.path)}: ${message}`);
  }
  return lines;
}

function article(expected: string): string {
  return expected === 'array' || expected === 'object' || expected === 'int' ? `an ${expected === 'int' ? 'integer' : expected}` : `a ${expected}`;
}

/**
 * Checks within the file: duplicates, graph validity, price rules, and references that must resolve
 * inside the file. References that may point at rows already stored are resolved by the loader.
 */
export function checkCatalog(catalog: Catalog): string[] {
  const errors: string[] = [];
  const err = (at: string, message: string) => errors.push(`${at}: ${message}`);

  const handles = new Map<string, number>();
  const accountIds = new Map<string, number>();
  const secrets = new Map<string, string>();
  catalog.accounts.forEach((a, i) => {
    const at = `accounts[${i}]`;
    const h = a.handle.toLowerCase();
    if (handles.has(h)) err(`${at}.handle`, `duplicate handle "${a.handle}" (also accounts[${handles.get(h)}])`);
    else handles.set(h, i);
    if (a.id) {
      const key = a.id.toLowerCase();
      if (accountIds.has(key)) err(`${at}.id`, `duplicate account id (also accounts[${accountIds.get(key)}])`);
      else accountIds.set(key, i);
    }
    a.apiKeys.forEach((k, j) => {
      const kat = `${at}.apiKeys[${j}]`;
      if (secrets.has(k.secret)) err(`${kat}.secret`, `duplicate API key secret (also ${secrets.get(k.secret)})`);
      else secrets.set(k.secret, kat);
    });
    const urls = new Map<string, number>();
    a.webhooks.forEach((w, j) => {
      if (urls.has(w.url)) err(`${at}.webhooks[${j}].url`, `duplicate webhook url (also webhooks[${urls.get(w.url)}])`);
      else urls.set(w.url, j);
    });
  });

  const workflowIds = new Map<string, number>();
  const versionIds = new Map<string, string>();
  const ownerNames = new Map<string, number>();
  catalog.workflows.forEach((w, i) => {
    const at = `workflows[${i}]`;
    if (w.id) {
      const key = w.id.toLowerCase();
      if (workflowIds.has(key)) err(`${at}.id`, `duplicate workflow id (also workflows[${workflowIds.get(key)}])`);
      else workflowIds.set(key, i);
    }
    const ownerName = `${w.owner.toLowerCase()}\u0000${w.name}`;
    const other = ownerNames.get(ownerName);
    if (other !== undefined && (!w.id || !catalog.workflows[other].id)) {
      err(`${at}.name`, `workflows[${other}] of "${w.owner}" has the same name; workflows without an id are keyed by (owner, name), so give both an id`);
    }
    if (other === undefined) ownerNames.set(ownerName, i);
    if (w.runModel === 'free' && !usd(w.priceUsd).isZero()) err(`${at}.priceUsd`, 'a free workflow has no creator price (use runModel per_run or priceUsd 0)');
    if (w.computeLimitUsd !== null && usd(w.computeLimitUsd).isZero()) err(`${at}.computeLimitUsd`, 'must be greater than 0 (or null for the default)');

    const labels = new Map<string, number>();
    w.versions.forEach((v, j) => {
      const vat = `${at}.versions[${j}]`;
      if (labels.has(v.label)) err(`${vat}.label`, `duplicate label "${v.label}" (also versions[${labels.get(v.label)}])`);
      else labels.set(v.label, j);
      if (v.id) {
        const key = v.id.toLowerCase();
        if (versionIds.has(key)) err(`${vat}.id`, `duplicate version id (also ${versionIds.get(key)})`);
        else versionIds.set(key, vat);
      }
      errors.push(...validateGraph(v.graph, `${vat}.graph`));
    });
  });

  const pins = new Map<string, number>();
  catalog.purchases.forEach((p, i) => {
    const key = `${p.account.toLowerCase()}\u0000${p.workflow.toLowerCase()}`;
    if (pins.has(key)) err(`purchases[${i}]`, `duplicate purchase of this workflow by "${p.account}" (also purchases[${pins.get(key)}])`);
    else pins.set(key, i);
  });
  const bundles = new Map<string, number>();
  catalog.bundles.forEach((b, i) => {
    const key = `${b.account.toLowerCase()}\u0000${b.workflow.toLowerCase()}\u0000${b.version}`;
    if (bundles.has(key)) err(`bundles[${i}]`, `duplicate bundle for this account, workflow and version (also bundles[${bundles.get(key)}])`);
    else bundles.set(key, i);
  });
  return errors;
}
