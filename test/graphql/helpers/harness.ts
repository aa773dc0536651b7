import { randomBytes } from 'node:crypto';
import { createApp, type App, type AppOptions } from '../../../src/app.ts';
import { parseCatalog } from '../../../src/catalog/parse-catalog.ts';
import { loadCatalog } from '../../../src/catalog/load-catalog.ts';
import { loadConfig } from '../../../src/config/config.ts';
import type { Em } from '../../../src/db/orm.ts';
import { NullEngine } from '../../../src/runs/engine-port.ts';
import { authenticateKey } from '../../../src/services/auth/authenticate-key.ts';
import type { NewRunEvent } from '../../../src/domain/run-steps.ts';
import { appendRunEvents } from '../../../src/runs/fenced-write.ts';
import { startRun } from '../../../src/runs/start-run.ts';
import { resetDb, testOrm } from '../../helpers/db.ts';

/** A running app over real HTTP for the GraphQL suites, with a small catalog. */

export const TOKEN = 'test-internal-token-123456';
export const GREETER = '11111111-1111-4111-8111-111111111111';
export const PRIVATE_TOOL = '22222222-2222-4222-8222-222222222222';
export const ALICE_SECRET = 'wr_test_alice_key_0001';
export const BOB_SECRET = 'wr_test_bob_key_0001';
export const WEBHOOK_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

const graph = (template: string, inputs: string[]) => ({
  nodes: [
    ...inputs.map((id) => ({ id, kind: 'input.text' })),
    { id: 'greet', kind: 'text.template', template },
    { id: 'out', kind: 'output', from: 'greet', name: 'greeting', type: 'text' },
  ],
});

export const CATALOG = JSON.stringify({
  pricing: { stepUsd: '0.000100' },
  accounts: [
    {
      handle: 'alice',
      walletUsd: '10.000000',
      connections: ['github'],
      apiKeys: [{ secret: ALICE_SECRET, scopes: ['run:execute', 'run:read'], rateLimitPerMinute: 1000, spendCap: { window: 'daily', usd: '5.00' } }],
      webhooks: [{ url: 'https://example.test/hooks', secret: WEBHOOK_SECRET }],
    },
    {
      handle: 'bob',
      walletUsd: '3.000000',
      apiKeys: [{ secret: BOB_SECRET, scopes: ['run:execute', 'run:read'], rateLimitPerMinute: 1000 }],
    },
    { handle: 'carol', walletUsd: '1.500000' },
  ],
  workflows: [
    {
      id: GREETER,
      owner: 'alice',
      name: 'Greeter',
      description: 'Says hello',
      runModel: 'per_run',
      priceUsd: '0.250000',
      listing: 'public',
      activeVersion: 'v2',
      versions: [
        { label: 'v1', graph: graph('Hello {{name}}', ['name']) },
        { label: 'v2', graph: graph('Hello {{name}} from {{place}}', ['name', 'place']) },
      ],
    },
    {
      id: PRIVATE_TOOL,
      owner: 'bob',
      name: 'Private tool',
      runModel: 'free',
      listing: 'none',
      versions: [{ label: 'v1', graph: graph('Tool {{name}}', ['name']) }],
    },
  ],
  purchases: [{ account: 'bob', workflow: GREETER, version: 'v1' }],
});

export interface Harness {
  app: App;
  url: string;
  /** POST /graphql with the internal token (or the given headers). */
  gql<T = Record<string, unknown>>(query: string, variables?: Record<string, unknown>, headers?: Record<string, string>): Promise<GqlResponse<T>>;
  /** `extra`: more body fields (metadata). */
  startRun(secret: string, workflow: string, inputs: Record<string, unknown>, extra?: Record<string, unknown>): Promise<string>;
  appendEvents(runId: string, events: NewRunEvent[]): Promise<number>;
  em(): Em;
  close(): Promise<void>;
}

export interface GqlResponse<T> {
  status: number;
  body: { data?: T | null; errors?: { message: string; extensions?: Record<string, unknown> }[] };
  text: string;
}

export interface HarnessOptions {
  /** The engine to run; default NullEngine (accepted runs stay pending, the tests drive the log). */
  engine?: AppOptions['engine'];
  /** Catalog JSON/YAML; default CATALOG above. */
  catalog?: string;
  /** The service's logger; default one at LOG_LEVEL (silent). */
  log?: AppOptions['log'];
}

export async function startHarness(env: Record<string, string> = {}, opts: HarnessOptions = {}): Promise<Harness> {
  const orm = await testOrm();
  await resetDb(orm);
  const config = loadConfig({
    PORT: '0',
    CATALOG_FILE: 'none',
    INTERNAL_API_TOKEN: TOKEN,
    LOG_LEVEL: 'silent',
    ENCRYPTION_KEY: randomBytes(32).toString('hex'),
    ...env,
  });
  const app = await createApp({ config, orm, log: opts.log, engine: opts.engine ?? (() => new NullEngine()) });
  await loadCatalog(orm, parseCatalog(opts.catalog ?? CATALOG, 'graphql-test-catalog'), { sealer: app.deps.sealer });
  const url = await app.listen();
  const em = () => app.deps.orm.em.fork() as unknown as Em;
  return {
    app,
    url,
    em,
    async gql(query, variables, headers) {
      const res = await fetch(`${url}/graphql`, {
        method: 'POST',
        headers: headers ?? { 'Content-Type': 'application/json', Authorization: `Bearer ${TOKEN}` },
        body: JSON.stringify({ query, variables }),
      });
      const text = await res.text();
      let body = {};
      try {
        body = JSON.parse(text);
      } catch {
        /* not JSON: leave empty */
      }
      return { status: res.status, body, text } as GqlResponse<never>;
    },
    async startRun(secret, workflow, inputs, extra = {}) {
      const principal = await authenticateKey(app.deps, `Bearer ${secret}`);
      const { run } = await startRun(app.deps, principal, { body: { workflow, inputs, ...extra } });
      return run.id;
    },
    async appendEvents(runId, events) {
      const { last } = await em().transactional((tx) => appendRunEvents(tx as unknown as Em, runId, events));
      app.deps.bus.publish(runId, last);
      return last;
    },
    close: () => app.close(),
  };
}

export function errorCodes(res: GqlResponse<unknown>): string[] {
  return (res.body.errors ?? []).map((e) => String(e.extensions?.code));
}
