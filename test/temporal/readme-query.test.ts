import { readFileSync } from 'node:fs';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { loadCatalog } from '../../src/catalog/load-catalog.ts';
import { parseCatalog } from '../../src/catalog/parse-catalog.ts';
import { DEMO_CATALOG_FILE } from '../../src/config/config.ts';
import { authenticateKey } from '../../src/services/auth/authenticate-key.ts';
import { startRun } from '../../src/runs/start-run.ts';
import { resetDb, testOrm } from '../helpers/db.ts';
import { eventually, runStatusOf, startLiveHarness, workflowClosed } from '../helpers/live-temporal.ts';
import { countTemporal, temporalAddress } from '../helpers/temporal.ts';

/**
 * The README's `temporal workflow list` example finds what it says: a failed run the demo key started
 * (on the demo catalog), through the query as the README prints it. `AccountHandle` is the caller's
 * handle, so the demo key's run on a workflow acme owns would not be found under acme.
 */

const orm = await testOrm();
const address = temporalAddress('README query');

const readme = readFileSync('README.md', 'utf8');
const example = /temporal workflow list --query '([^']+)'/.exec(readme)?.[1];
const PARSE_LATER = '00000000-0000-4000-8000-00000000f004';

if (address) {
  test(
    "the README's failed-runs query finds a failed run the demo key started",
    countTemporal(async () => {
      assert.ok(example, 'the README has a `temporal workflow list --query` example');
      await resetDb(orm);
      const h = await startLiveHarness(orm, address);
      try {
        await loadCatalog(orm, parseCatalog(readFileSync(DEMO_CATALOG_FILE, 'utf8'), DEMO_CATALOG_FILE), { sealer: h.deps.sealer });
        const principal = await authenticateKey(h.deps, 'Bearer wr_demo_key');
        // "Parse later" waits five seconds, then fails to parse a document that is not JSON.
        const { run } = await startRun(h.deps, principal, { body: { workflow: PARSE_LATER, inputs: { payload: 'not json' } } });
        await workflowClosed(h, run.id);
        assert.is(await runStatusOf(orm, run.id), 'failed');
        const found = await eventually(`run ${run.id} listed by ${example}`, async () => {
          const ids: string[] = [];
          for await (const w of h.client.workflow.list({ query: example! })) ids.push(w.workflowId);
          return ids.includes(run.id) ? ids : null;
        });
        assert.ok(found.includes(run.id));
      } finally {
        await h.close();
      }
    }),
  );
}

test.run();
