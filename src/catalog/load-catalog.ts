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
import { readPricing, savePricing, type Pricing } from './pricing.ts';
import type { Catalog } from './schema.ts';

/**
 * Loading the catalog (docs/design/catalog.md): one transaction, an idempotent upsert. It creates what is
 * missing and updates descriptive fields, and never touches state the service owns once created:
 * wallet balances and the ledger (a wallet and its initial `credit` row are written only when the
 * account is created), bundle runs left (an existing bundle is left exactly as it is), existing purchase
 * pins, runs. Nothing is ever deleted: rows absent from the file stay. See schema.ts for the upsert keys.
 */

export interface UpsertCounts {
  created: number;
  updated: number;
  unchanged: number;
}

export interface LoadReport {
  source: string;
  /** Totals over every kind of row below. */
  created: number;
  updated: number;
  unchanged: number;
  accounts: UpsertCounts;
  providerKeys: UpsertCounts;
  apiKeys: UpsertCounts;
  webhooks: UpsertCounts;
  workflows: UpsertCounts;
  versions: UpsertCounts;
  /** Existing pins are kept ("unchanged") even when the file names another version. */
  purchases: UpsertCounts;
  /** Existing bundles are kept as they are (runs left, price). */
  bundles: UpsertCounts;
  /** The pricing in force after the load (the file's, or the stored one when the file has none). */
  pricing: Pricing;
  pricingUpdated: boolean;
}

export interface LoadOptions {
  sealer: Sealer;
}

const counts = (): UpsertCounts => ({ created: 0, updated: 0, unchanged: 0 });
const same = (a: unknown, b: unknown) => canonicalJson(a) === canonicalJson(b);
const timeOrNull = (d: Date | null) => (d ? d.getTime() : null);

/** Upserts the catalog in one transaction; on any problem nothing is written and CatalogError is thrown. */
export async function loadCatalog(orm: Orm, catalog: Catalog, opts: LoadOptions): Promise<LoadReport> {
  const source = catalog.source ?? 'catalog';
  return forkEm(orm).transactional(async (tx) => {
    const loader = new Loader(tx as unknown as Em, catalog, opts.sealer, source);
    const report = await loader.run();
    if (loader.errors.length) throw new CatalogError(loader.errors, source);
    return report;
  });
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

  private q<T = Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<T[]> {
    return this.em.execute<T[]>(sql, params);
  }

  async run(): Promise<LoadReport> {
    // Two processes starting together (API and worker) load the same file: serialise them.
    await this.q(`select pg_advisory_xact_lock(7348190021)`);
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
      const byHandle = (await this.q(`select * from accounts where handle = ?`, [a.handle]))[0];
      let row = byHandle;
      if (a.id) {
        row = (await this.q(`select * from accounts where id = ?`, [a.id]))[0];
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
        await this.q(
          `insert into accounts (id, handle, restricted, listings_paused, max_concurrent_runs, connections, created_at)
           values (?, ?, ?, ?, ?, ?::jsonb, now())`,
          [accountId, a.handle, a.restricted, a.listingsPaused, a.maxConcurrentRuns, JSON.stringify(a.connections)],
        );
        // The only time the catalog sets money: the opening balance of a new account.
        await this.q(`insert into wallets (account_id, balance_usd, held_usd, updated_at) values (?, ?, 0, now())`, [accountId, a.walletUsd]);
        if (usd(a.walletUsd).greaterThan(0)) {
          await this.q(
            `insert into ledger_entries (account_id, run_id, kind, amount_usd, balance_after_usd, note, created_at)
             values (?, null, 'credit', ?, ?, ?, now())`,
            [accountId, a.walletUsd, a.walletUsd, 'opening balance from the catalog'],
          );
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
          await this.q(
            `update accounts set handle = ?, restricted = ?, listings_paused = ?, max_concurrent_runs = ?, connections = ?::jsonb where id = ?`,
            [a.handle, a.restricted, a.listingsPaused, a.maxConcurrentRuns, JSON.stringify(a.connections), accountId],
          );
          this.report.accounts.updated++;
        } else this.report.accounts.unchanged++;
        // An account created by an older catalog always has a wallet; make sure, without touching a balance.
        await this.q(`insert into wallets (account_id, balance_usd, held_usd, updated_at) values (?, 0, 0, now()) on conflict do nothing`, [accountId]);
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
      const row = (await this.q(`select id, ciphertext from provider_keys where account_id = ? and provider = ?`, [accountId, provider]))[0];
      if (!row) {
        await this.q(`insert into provider_keys (id, account_id, provider, ciphertext, created_at) values (?, ?, ?, ?, now())`, [
          randomUUID(),
          accountId,
          provider,
          this.sealer.seal(secret),
        ]);
        this.report.providerKeys.created++;
      } else if (!this.sealedEquals(row.ciphertext, secret)) {
        await this.q(`update provider_keys set ciphertext = ? where id = ?`, [this.sealer.seal(secret), row.id]);
        this.report.providerKeys.updated++;
      } else this.report.providerKeys.unchanged++;
    }
  }

  private async apiKey(at: string, accountId: string, k: Catalog['accounts'][number]['apiKeys'][number]): Promise<void> {
    const hash = hashApiKey(k.secret);
    const row = (await this.q(`select * from api_keys where key_hash = ?`, [hash]))[0];
    const capWindow = k.spendCap?.window ?? null;
    const capUsd = k.spendCap?.usd ?? null;
    const expires = k.expiresAt ? k.expiresAt.toISOString() : null;
    if (!row) {
      await this.q(
        `insert into api_keys (id, account_id, key_hash, prefix, scopes, rate_limit_per_minute, spend_cap_window, spend_cap_usd, expires_at, revoked, created_at)
         values (?, ?, ?, ?, ?::jsonb, ?, ?, ?, ?::timestamptz, ?, now())`,
        [randomUUID(), accountId, hash, keyPrefix(k.secret), JSON.stringify(k.scopes), k.rateLimitPerMinute, capWindow, capUsd, expires, k.revoked],
      );
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
      (row.spend_cap_window ?? null) !== capWindow ||
      moneyOrNull(row.spend_cap_usd) !== capUsd ||
      timeOrNull(dateOrNull(row.expires_at)) !== timeOrNull(k.expiresAt) ||
      Boolean(row.revoked) !== k.revoked;
    if (changed) {
      await this.q(
        `update api_keys set scopes = ?::jsonb, rate_limit_per_minute = ?, spend_cap_window = ?, spend_cap_usd = ?, expires_at = ?::timestamptz, revoked = ? where id = ?`,
        [JSON.stringify(k.scopes), k.rateLimitPerMinute, capWindow, capUsd, expires, k.revoked, row.id],
      );
      this.report.apiKeys.updated++;
    } else this.report.apiKeys.unchanged++;
  }

  private async webhook(accountId: string, w: Catalog['accounts'][number]['webhooks'][number]): Promise<void> {
    const row = (await this.q(`select id, secret_ciphertext, events from webhook_endpoints where account_id = ? and url = ?`, [accountId, w.url]))[0];
    const events = w.events === null ? null : JSON.stringify(w.events);
    if (!row) {
      await this.q(`insert into webhook_endpoints (id, account_id, url, secret_ciphertext, events, created_at) values (?, ?, ?, ?, ?::jsonb, now())`, [
        randomUUID(),
        accountId,
        w.url,
        this.sealer.seal(w.secret),
        events,
      ]);
      this.report.webhooks.created++;
      return;
    }
    const secretSame = this.sealedEquals(row.secret_ciphertext, w.secret);
    const eventsSame = same(row.events === null ? null : json(row.events), w.events);
    if (secretSame && eventsSame) {
      this.report.webhooks.unchanged++;
      return;
    }
    await this.q(`update webhook_endpoints set secret_ciphertext = ?, events = ?::jsonb where id = ?`, [
      secretSame ? row.secret_ciphertext : this.sealer.seal(w.secret),
      events,
      row.id,
    ]);
    this.report.webhooks.updated++;
  }

  /** An account of the file, or one already stored; null (and an error at `at`) when neither. */
  private async accountId(handle: string, at: string): Promise<string | null> {
    if (!this.accountIds.has(handle)) {
      const row = (await this.q<{ id: string }>(`select id from accounts where handle = ?`, [handle]))[0];
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
      if (w.id) row = (await this.q(`select * from workflows where id = ?`, [w.id]))[0];
      else {
        const rows = await this.q(`select * from workflows where owner_id = ? and name = ? order by created_at, id`, [ownerId, w.name]);
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
      const stored = row ? await this.q<VersionRow>(`select id, workflow_id, label, graph_hash from workflow_versions where workflow_id = ?`, [workflowId]) : [];
      const labels = new Map<string, string>(stored.map((v) => [v.label, String(v.id)]));
      const inserts: { id: string; label: string; graph: Graph; hash: string }[] = [];
      let versionErrors = false;
      for (const [j, v] of w.versions.entries()) {
        const vat = `${at}.versions[${j}]`;
        const hash = canonicalGraphHash(v.graph);
        const byLabel = stored.find((s) => s.label === v.label);
        let existing: VersionRow | undefined = byLabel;
        if (v.id) {
          existing = (await this.q<VersionRow>(`select id, workflow_id, label, graph_hash from workflow_versions where id = ?`, [v.id]))[0];
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

      const activeLabel = w.activeVersion ?? w.versions[w.versions.length - 1]!.label;
      const activeVersionId = labels.get(activeLabel);
      if (!activeVersionId) {
        this.err(`${at}.activeVersion`, `"${activeLabel}" is not a version of this workflow (labels: ${[...labels.keys()].join(', ')})`);
        continue;
      }

      const fields = workflowFields(w, activeVersionId);
      if (!row) {
        await this.q(
          `insert into workflows (id, owner_id, name, description, service_code, run_model, price_usd, listing, unlock, api_access,
                                  credential_mode, compute_limit_usd, active_version_id, runs_count, created_at)
           values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, now())`,
          [workflowId, ownerId, ...fields.values],
        );
        this.report.workflows.created++;
      } else if (fields.differsFrom(row)) {
        await this.q(
          `update workflows set name = ?, description = ?, service_code = ?, run_model = ?, price_usd = ?, listing = ?, unlock = ?,
                                api_access = ?, credential_mode = ?, compute_limit_usd = ?, active_version_id = ?
            where id = ?`,
          [...fields.values, workflowId],
        );
        this.report.workflows.updated++;
      } else this.report.workflows.unchanged++;

      // Created one by one so created_at orders them as listed (newest last).
      for (const v of inserts) {
        await this.q(
          `insert into workflow_versions (id, workflow_id, label, graph, graph_hash, created_at) values (?, ?, ?, ?::jsonb, ?, clock_timestamp())`,
          [v.id, workflowId, v.label, JSON.stringify(v.graph), v.hash],
        );
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
      const row = (await this.q(`select id from workflows where id = ?`, [ref]))[0];
      if (row) return String(row.id);
      this.err(at, `unknown workflow ${ref}`);
      return null;
    }
    const matches = this.catalog.workflows.flatMap((w, i) => (w.name === ref ? [i] : []));
    if (matches.length === 1) return this.workflowIds[matches[0]!] ?? null;
    this.err(at, matches.length ? `"${ref}" names ${matches.length} workflows; use the workflow id` : `unknown workflow "${ref}" (use a workflow id or the name of a workflow in this file)`);
    return null;
  }

  /** `version`: a label or an id of a version of that workflow (in the file or stored). */
  private async resolveVersion(workflowId: string, ref: string, at: string): Promise<string | null> {
    const known = this.versionIds.get(workflowId);
    if (known?.has(ref)) return known.get(ref)!;
    if (known && [...known.values()].includes(ref.toLowerCase())) return ref.toLowerCase();
    const rows = await this.q<{ id: string }>(
      isUuid(ref) ? `select id from workflow_versions where workflow_id = ? and id = ?` : `select id from workflow_versions where workflow_id = ? and label = ?`,
      [workflowId, ref],
    );
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
      const row = (await this.q(`select id from purchases where account_id = ? and workflow_id = ?`, [accountId, workflowId]))[0];
      if (row) {
        // The pin belongs to the buyer now (accept-update moves it); a reload never resets it.
        this.report.purchases.unchanged++;
        continue;
      }
      await this.q(
        `insert into purchases (id, account_id, workflow_id, version_id, created_at, updated_at) values (?, ?, ?, ?, now(), now())`,
        [randomUUID(), accountId, workflowId, versionId],
      );
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
      const row = (await this.q(`select id from bundles where account_id = ? and workflow_id = ? and version_id = ?`, [accountId, workflowId, versionId]))[0];
      if (row) {
        // Runs left and the price paid are money state: never reset by a reload.
        this.report.bundles.unchanged++;
        continue;
      }
      await this.q(
        `insert into bundles (id, account_id, workflow_id, version_id, runs_total, runs_left, usd_per_run, created_at) values (?, ?, ?, ?, ?, ?, ?, now())`,
        [randomUUID(), accountId, workflowId, versionId, b.runs, b.runs, b.usdPerRun],
      );
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
