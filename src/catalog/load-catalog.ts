import { randomUUID } from 'node:crypto';
import { em as forkEm, type Em, type Orm } from '../db/orm.ts';
import { dateOrNull, json } from '../db/sql.ts';
import type { Graph } from '../domain/graph/types.ts';
import { canonicalJson } from '../domain/canonical-json.ts';
import { isUuid } from '../domain/ids.ts';
import { usd } from '../domain/money.ts';
import { hashApiKey, type Sealer } from '../security/crypto.ts';
import { keyPrefix, moneyOrNull, normalisePricing, workflowFields } from './catalog-fields.ts';
import { canonicalGraphHash, CatalogError } from './parse-catalog.ts';
import { pricingCommitted, readPricing, savePricing } from './pricing.ts';
import { query, type Statement } from '../db/statement.ts';
import {
  CATALOG_ACCOUNT_BY_HANDLE,
  CATALOG_ACCOUNT_BY_ID,
  CATALOG_ACCOUNT_ID_BY_HANDLE,
  CATALOG_API_KEY_BY_HASH,
  CATALOG_ENSURE_WALLET,
  CATALOG_INSERT_ACCOUNT,
  CATALOG_INSERT_API_KEY,
  CATALOG_API_KEY_FLOW,
  CATALOG_INSERT_PROVIDER_KEY,
  CATALOG_INSERT_WEBHOOK_ENDPOINT,
  CATALOG_OPEN_WALLET,
  CATALOG_OPENING_CREDIT,
  CATALOG_PROVIDER_KEY,
  CATALOG_UPDATE_ACCOUNT,
  CATALOG_UPDATE_API_KEY,
  CATALOG_UPDATE_PROVIDER_KEY,
  CATALOG_UPDATE_WEBHOOK_ENDPOINT,
  CATALOG_WEBHOOK_ENDPOINT,
  LOCK_CATALOG_LOAD,
  type ApiKeyColumns,
} from '../sql/catalog-accounts.ts';
import {
  CATALOG_INSERT_VERSION,
  CATALOG_INSERT_WORKFLOW,
  CATALOG_UPDATE_WORKFLOW,
  CATALOG_VERSION_BY_ID,
  CATALOG_VERSION_ID,
  CATALOG_VERSION_ID_BY_LABEL,
  CATALOG_VERSIONS_OF_WORKFLOW,
  CATALOG_WORKFLOW_BY_ID,
  CATALOG_WORKFLOW_ID,
  CATALOG_WORKFLOWS_BY_NAME,
} from '../sql/catalog-workflows.ts';
import { CATALOG_BUNDLE, CATALOG_INSERT_BUNDLE, CATALOG_INSERT_PURCHASE, CATALOG_PURCHASE } from '../sql/catalog-purchases.ts';
import type { Catalog } from './schema.ts';
import type { LoadOptions, LoadReport, UpsertCounts } from './load-report.ts';

export type { LoadOptions, LoadReport, UpsertCounts } from './load-report.ts';

/**
 * Loading the catalog (docs/design/catalog.md): one transaction, an idempotent upsert. It creates what is
 * missing and updates descriptive fields, and never touches state the service owns once created:
 * wallet balances and the ledger (a wallet and its initial `credit` row are written only when the
 * account is created), bundle runs left (an existing bundle is left exactly as it is), existing purchase
 * pins, runs. Nothing is ever deleted: rows absent from the file stay. See schema.ts for the upsert keys.
 */

const counts = (): UpsertCounts => ({ created: 0, updated: 0, unchanged: 0 });
const same = (a: unknown, b: unknown) => canonicalJson(a) === canonicalJson(b);
const timeOrNull = (d: Date | null) => (d ? d.getTime() : null);

/** Upserts the catalog in one transaction; on any problem nothing is written and CatalogError is thrown. */
export async function loadCatalog(orm: Orm, catalog: Catalog, opts: LoadOptions): Promise<LoadReport> {
  const source = catalog.source ?? 'catalog';
  const report = await forkEm(orm).transactional(async (tx) => {
    const loader = new Loader(tx, catalog, opts.sealer, source);
    const report = await loader.run();
    if (loader.errors.length) throw new CatalogError(loader.errors, source);
    return report;
  });
  if (report.pricingUpdated) pricingCommitted();
  return report;
}

interface VersionRow {
  id: string;
  workflow_id: string;
  label: string;
  graph_hash: string;
}

class Loader {
  readonly errors: string[] = [];
  readonly report: LoadReport;
  /** handle → account id, for accounts in the file (after upsert) and looked up in the database. */
  private readonly accountIds = new Map<string, string | null>();
  /** file workflow index → workflow id (null when it could not be resolved). */
  private readonly workflowIds: (string | null)[] = [];
  /** workflow id → label → version id, for versions of the file. */
  private readonly versionIds = new Map<string, Map<string, string>>();

  constructor(
    private readonly em: Em,
    private readonly catalog: Catalog,
    private readonly sealer: Sealer,
    source: string,
  ) {
    this.report = {
      source,
      created: 0,
      updated: 0,
      unchanged: 0,
      accounts: counts(),
      providerKeys: counts(),
      apiKeys: counts(),
      webhooks: counts(),
      workflows: counts(),
      versions: counts(),
      purchases: counts(),
      bundles: counts(),
      pricing: { stepUsd: '0.000100', models: {} },
      pricingUpdated: false,
    };
  }

  private err(at: string, message: string): void {
    this.errors.push(`${at}: ${message}`);
  }

  private q<T = Record<string, unknown>>(s: Statement, params: unknown[] = []): Promise<T[]> {
    return query<T>(this.em, s, params);
  }

  async run(): Promise<LoadReport> {
    // Two processes starting together (API and worker) load the same file: serialise them.
    await this.q(LOCK_CATALOG_LOAD);
    await this.accounts();
    await this.workflows();
    await this.purchases();
    await this.bundles();
    await this.pricing();
    const r = this.report;
    for (const c of [r.accounts, r.providerKeys, r.apiKeys, r.webhooks, r.workflows, r.versions, r.purchases, r.bundles]) {
      r.created += c.created;
      r.updated += c.updated;
      r.unchanged += c.unchanged;
    }
    return r;
  }

  // ---------------------------------------------------------------- accounts

  private async accounts(): Promise<void> {
    for (const [i, a] of this.catalog.accounts.entries()) {
      const at = `accounts[${i}]`;
      const byHandle = (await this.q(CATALOG_ACCOUNT_BY_HANDLE, [a.handle]))[0];
      let row = byHandle;
      if (a.id) {
        row = (await this.q(CATALOG_ACCOUNT_BY_ID, [a.id]))[0];
        if (!row && byHandle) {
          this.err(`${at}.id`, `account "${a.handle}" already exists with id ${String(byHandle.id)}`);
          continue;
        }
        if (row && byHandle && byHandle.id !== row.id) {
          this.err(`${at}.handle`, `handle "${a.handle}" already belongs to account ${String(byHandle.id)}`);
          continue;
        }
      }

      let accountId: string;
      if (!row) {
        accountId = a.id ?? randomUUID();
        await this.q(CATALOG_INSERT_ACCOUNT, [accountId, a.handle, a.restricted, a.listingsPaused, a.maxConcurrentRuns, JSON.stringify(a.connections)]);
        // The only time the catalog sets money: the opening balance of a new account.
        await this.q(CATALOG_OPEN_WALLET, [accountId, a.walletUsd]);
        if (usd(a.walletUsd).greaterThan(0)) {
          await this.q(CATALOG_OPENING_CREDIT, [accountId, a.walletUsd]);
        }
        this.report.accounts.created++;
      } else {
        accountId = String(row.id);
        const changed =
          row.handle !== a.handle ||
          Boolean(row.restricted) !== a.restricted ||
          Boolean(row.listings_paused) !== a.listingsPaused ||
          (row.max_concurrent_runs === null ? null : Number(row.max_concurrent_runs)) !== a.maxConcurrentRuns ||
          !same(json(row.connections), a.connections);
        if (changed) {
          await this.q(CATALOG_UPDATE_ACCOUNT, [a.handle, a.restricted, a.listingsPaused, a.maxConcurrentRuns, JSON.stringify(a.connections), accountId]);
          this.report.accounts.updated++;
        } else this.report.accounts.unchanged++;
        // An account created by an older catalog always has a wallet; make sure, without touching a balance.
        await this.q(CATALOG_ENSURE_WALLET, [accountId]);
      }
      this.accountIds.set(a.handle, accountId);

      await this.providerKeys(accountId, a.providerKeys);
      for (const [j, k] of a.apiKeys.entries()) await this.apiKey(`${at}.apiKeys[${j}]`, accountId, k);
      for (const w of a.webhooks) await this.webhook(accountId, w);
    }
  }

  /** Sealed values are compared by opening them: resealing gives a new ciphertext every time. */
  private sealedEquals(ciphertext: unknown, plaintext: string): boolean {
    try {
      return this.sealer.open(String(ciphertext)) === plaintext;
    } catch {
      return false; // sealed under another key: reseal with the current one
    }
  }

  private async providerKeys(accountId: string, keys: Partial<Record<string, string>>): Promise<void> {
    for (const [provider, secret] of Object.entries(keys)) {
      if (secret === undefined) continue;
      const row = (await this.q(CATALOG_PROVIDER_KEY, [accountId, provider]))[0];
      if (!row) {
        await this.q(CATALOG_INSERT_PROVIDER_KEY, [randomUUID(), accountId, provider, this.sealer.seal(secret)]);
        this.report.providerKeys.created++;
      } else if (!this.sealedEquals(row.ciphertext, secret)) {
        await this.q(CATALOG_UPDATE_PROVIDER_KEY, [this.sealer.seal(secret), row.id]);
        this.report.providerKeys.updated++;
      } else this.report.providerKeys.unchanged++;
    }
  }

  private async apiKey(at: string, accountId: string, k: Catalog['accounts'][number]['apiKeys'][number]): Promise<void> {
    const hash = hashApiKey(k.secret);
    const row = (await this.q(CATALOG_API_KEY_BY_HASH, [hash]))[0];
    const capWindow = k.spendCap?.window ?? null;
    const capUsd = k.spendCap?.usd ?? null;
    const expires = k.expiresAt ? k.expiresAt.toISOString() : null;
    const flow = [k.highPriority, k.maxConcurrentPerConcurrencyKey];
    if (!row) {
      const id = randomUUID();
      const columns: ApiKeyColumns = {
        id,
        account_id: accountId,
        key_hash: hash,
        prefix: keyPrefix(k.secret),
        scopes: k.scopes,
        rate_limit_per_minute: k.rateLimitPerMinute,
        run_budget_per_minute: k.runBudgetPerMinute,
        spend_cap_window: capWindow,
        spend_cap_usd: capUsd,
        expires_at: expires,
        revoked: k.revoked,
      };
      await this.q(CATALOG_INSERT_API_KEY, [columns]);
      await this.q(CATALOG_API_KEY_FLOW, [id, ...flow]);
      this.report.apiKeys.created++;
      return;
    }
    if (row.account_id !== accountId) {
      this.err(`${at}.secret`, 'this API key already belongs to another account');
      return;
    }
    const changed =
      !same(json(row.scopes), k.scopes) ||
      Number(row.rate_limit_per_minute) !== k.rateLimitPerMinute ||
      Number(row.run_budget_per_minute) !== k.runBudgetPerMinute ||
      (row.spend_cap_window ?? null) !== capWindow ||
      moneyOrNull(row.spend_cap_usd) !== capUsd ||
      timeOrNull(dateOrNull(row.expires_at)) !== timeOrNull(k.expiresAt) ||
      Boolean(row.revoked) !== k.revoked ||
      Boolean(row.high_priority) !== k.highPriority ||
      (row.max_concurrent_per_concurrency_key === null ? null : Number(row.max_concurrent_per_concurrency_key)) !== k.maxConcurrentPerConcurrencyKey;
    if (changed) {
      const values = [JSON.stringify(k.scopes), k.rateLimitPerMinute, capWindow, capUsd, expires, k.revoked, row.id, k.runBudgetPerMinute];
      await this.q(CATALOG_UPDATE_API_KEY, values);
      await this.q(CATALOG_API_KEY_FLOW, [row.id, ...flow]);
      this.report.apiKeys.updated++;
    } else this.report.apiKeys.unchanged++;
  }

  private async webhook(accountId: string, w: Catalog['accounts'][number]['webhooks'][number]): Promise<void> {
    const row = (await this.q(CATALOG_WEBHOOK_ENDPOINT, [accountId, w.url]))[0];
    const events = w.events === null ? null : JSON.stringify(w.events);
    if (!row) {
      await this.q(CATALOG_INSERT_WEBHOOK_ENDPOINT, [randomUUID(), accountId, w.url, this.sealer.seal(w.secret), events]);
      this.report.webhooks.created++;
      return;
    }
    const secretSame = this.sealedEquals(row.secret_ciphertext, w.secret);
    const eventsSame = same(row.events === null ? null : json(row.events), w.events);
    if (secretSame && eventsSame) {
      this.report.webhooks.unchanged++;
      return;
    }
    await this.q(CATALOG_UPDATE_WEBHOOK_ENDPOINT, [secretSame ? row.secret_ciphertext : this.sealer.seal(w.secret), events, row.id]);
    this.report.webhooks.updated++;
  }

  /** An account of the file, or one already stored; null (and an error at `at`) when neither. */
  private async accountId(handle: string, at: string): Promise<string | null> {
    if (!this.accountIds.has(handle)) {
      const row = (await this.q<{ id: string }>(CATALOG_ACCOUNT_ID_BY_HANDLE, [handle]))[0];
      this.accountIds.set(handle, row ? String(row.id) : null);
    }
    const id = this.accountIds.get(handle) ?? null;
    if (!id && !this.catalog.accounts.some((a) => a.handle === handle)) this.err(at, `unknown account "${handle}" (not in this file nor in the database)`);
    return id;
  }

  // --------------------------------------------------------------- workflows

  private async workflows(): Promise<void> {
    for (const [i, w] of this.catalog.workflows.entries()) {
      this.workflowIds[i] = null;
      const at = `workflows[${i}]`;
      const ownerId = await this.accountId(w.owner, `${at}.owner`);
      if (!ownerId) continue;

      let row: Record<string, unknown> | undefined;
      if (w.id) row = (await this.q(CATALOG_WORKFLOW_BY_ID, [w.id]))[0];
      else {
        const rows = await this.q(CATALOG_WORKFLOWS_BY_NAME, [ownerId, w.name]);
        if (rows.length > 1) {
          this.err(`${at}.name`, `"${w.owner}" has ${rows.length} workflows named "${w.name}"; give this one an id`);
          continue;
        }
        row = rows[0];
      }
      if (row && row.owner_id !== ownerId) {
        this.err(`${at}.owner`, `workflow ${String(row.id)} belongs to another account; a workflow's owner cannot change`);
        continue;
      }
      const workflowId = row ? String(row.id) : (w.id ?? randomUUID());

      // Resolve every version first (ids, immutability) so the active version id is known up front.
      const stored = row ? await this.q<VersionRow>(CATALOG_VERSIONS_OF_WORKFLOW, [workflowId]) : [];
      const labels = new Map<string, string>(stored.map((v) => [v.label, String(v.id)]));
      const inserts: { id: string; label: string; graph: Graph; hash: string }[] = [];
      let versionErrors = false;
      for (const [j, v] of w.versions.entries()) {
        const vat = `${at}.versions[${j}]`;
        const hash = canonicalGraphHash(v.graph);
        const byLabel = stored.find((s) => s.label === v.label);
        let existing: VersionRow | undefined = byLabel;
        if (v.id) {
          existing = (await this.q<VersionRow>(CATALOG_VERSION_BY_ID, [v.id]))[0];
          if (existing && existing.workflow_id !== workflowId) {
            this.err(`${vat}.id`, `version ${v.id} belongs to another workflow`);
            versionErrors = true;
            continue;
          }
          if (existing && existing.label !== v.label) {
            this.err(`${vat}.label`, `version ${v.id} already exists with label "${existing.label}"; versions are immutable`);
            versionErrors = true;
            continue;
          }
          if (!existing && byLabel) {
            this.err(`${vat}.id`, `version ${v.label} already exists with id ${byLabel.id}`);
            versionErrors = true;
            continue;
          }
        }
        if (existing) {
          if (existing.graph_hash !== hash) {
            this.err(`${vat}.graph`, `version ${v.label} already exists with a different graph; versions are immutable`);
            versionErrors = true;
          } else this.report.versions.unchanged++;
          continue;
        }
        const id = v.id ?? randomUUID();
        inserts.push({ id, label: v.label, graph: v.graph, hash });
        labels.set(v.label, id);
      }
      if (versionErrors) continue;

      const activeLabel = w.activeVersion ?? w.versions[w.versions.length - 1].label;
      const activeVersionId = labels.get(activeLabel);
      if (!activeVersionId) {
        this.err(`${at}.activeVersion`, `"${activeLabel}" is not a version of this workflow (labels: ${[...labels.keys()].join(', ')})`);
        continue;
      }

      const fields = workflowFields(w, activeVersionId);
      if (!row) {
        await this.q(CATALOG_INSERT_WORKFLOW, [{ id: workflowId, owner_id: ownerId, ...fields.columns }]);
        this.report.workflows.created++;
      } else if (fields.differsFrom(row)) {
        await this.q(CATALOG_UPDATE_WORKFLOW, [{ id: workflowId, ...fields.columns }]);
        this.report.workflows.updated++;
      } else this.report.workflows.unchanged++;

      // Created one by one so created_at orders them as listed (newest last).
      for (const v of inserts) {
        await this.q(CATALOG_INSERT_VERSION, [v.id, workflowId, v.label, JSON.stringify(v.graph), v.hash]);
        this.report.versions.created++;
      }
      this.workflowIds[i] = workflowId;
      this.versionIds.set(workflowId, labels);
    }
  }

  /** `workflow` of a purchase/bundle: a workflow id (file or database) or the name of a workflow in this file. */
  private async resolveWorkflow(ref: string, at: string): Promise<string | null> {
    if (isUuid(ref)) {
      const i = this.catalog.workflows.findIndex((w) => w.id?.toLowerCase() === ref.toLowerCase());
      if (i >= 0) return this.workflowIds[i] ?? null;
      const row = (await this.q(CATALOG_WORKFLOW_ID, [ref]))[0];
      if (row) return String(row.id);
      this.err(at, `unknown workflow ${ref}`);
      return null;
    }
    const matches = this.catalog.workflows.flatMap((w, i) => (w.name === ref ? [i] : []));
    if (matches.length === 1) return this.workflowIds[matches[0]] ?? null;
    this.err(
      at,
      matches.length
        ? `"${ref}" names ${matches.length} workflows; use the workflow id`
        : `unknown workflow "${ref}" (use a workflow id or the name of a workflow in this file)`,
    );
    return null;
  }

  /** `version`: a label or an id of a version of that workflow (in the file or stored). */
  private async resolveVersion(workflowId: string, ref: string, at: string): Promise<string | null> {
    const known = this.versionIds.get(workflowId);
    if (known?.has(ref)) return known.get(ref)!;
    if (known && [...known.values()].includes(ref.toLowerCase())) return ref.toLowerCase();
    const rows = await this.q<{ id: string }>(isUuid(ref) ? CATALOG_VERSION_ID : CATALOG_VERSION_ID_BY_LABEL, [workflowId, ref]);
    if (rows[0]) return String(rows[0].id);
    this.err(at, `unknown version "${ref}" of workflow ${workflowId}`);
    return null;
  }

  // ------------------------------------------------------- purchases, bundles

  private async purchases(): Promise<void> {
    for (const [i, p] of this.catalog.purchases.entries()) {
      const at = `purchases[${i}]`;
      const accountId = await this.accountId(p.account, `${at}.account`);
      const workflowId = await this.resolveWorkflow(p.workflow, `${at}.workflow`);
      if (!accountId || !workflowId) continue;
      const versionId = await this.resolveVersion(workflowId, p.version, `${at}.version`);
      if (!versionId) continue;
      const row = (await this.q(CATALOG_PURCHASE, [accountId, workflowId]))[0];
      if (row) {
        // The pin belongs to the buyer now (accept-update moves it); a reload never resets it.
        this.report.purchases.unchanged++;
        continue;
      }
      await this.q(CATALOG_INSERT_PURCHASE, [randomUUID(), accountId, workflowId, versionId]);
      this.report.purchases.created++;
    }
  }

  private async bundles(): Promise<void> {
    for (const [i, b] of this.catalog.bundles.entries()) {
      const at = `bundles[${i}]`;
      const accountId = await this.accountId(b.account, `${at}.account`);
      const workflowId = await this.resolveWorkflow(b.workflow, `${at}.workflow`);
      if (!accountId || !workflowId) continue;
      const versionId = await this.resolveVersion(workflowId, b.version, `${at}.version`);
      if (!versionId) continue;
      const row = (await this.q(CATALOG_BUNDLE, [accountId, workflowId, versionId]))[0];
      if (row) {
        // Runs left and the price paid are money state: never reset by a reload.
        this.report.bundles.unchanged++;
        continue;
      }
      await this.q(CATALOG_INSERT_BUNDLE, [randomUUID(), accountId, workflowId, versionId, b.runs, b.usdPerRun]);
      this.report.bundles.created++;
    }
  }

  private async pricing(): Promise<void> {
    // What is stored, not this process's one-second cache: another process (or a reset) may have
    // changed it since, and a load that compared with the cache would then skip writing its pricing.
    const current = await readPricing(this.em);
    const wanted = this.catalog.pricing;
    if (wanted && !same(normalisePricing(current), wanted)) {
      await savePricing(this.em, wanted);
      this.report.pricingUpdated = true;
      this.report.pricing = wanted;
    } else this.report.pricing = normalisePricing(current);
  }
}
