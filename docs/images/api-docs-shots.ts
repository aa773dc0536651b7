/**
 * Takes docs/images/api-docs.png (the API reference at /docs, on "Start an asynchronous run") and
 * docs/images/graphiql.png (a query run in the GraphQL explorer at /graphql) from a running service
 * with headless Chromium. How to run it: docs/images/README.md.
 *
 *   npx tsx docs/images/api-docs-shots.ts <service origin> <INTERNAL_API_TOKEN>
 */
import { fileURLToPath } from 'node:url';
import { launchChromium, runInGraphiql } from '../../test/helpers/browser.ts';

const [origin = 'http://127.0.0.1:8080', token = ''] = process.argv.slice(2);
const out = (name: string) => fileURLToPath(new URL(name, import.meta.url));

const browser = await launchChromium();
if (!browser) process.exit(1);
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await page.goto(`${origin}/docs`);
  const op = page.getByText('Start an asynchronous run', { exact: true }).first();
  await op.waitFor({ timeout: 60_000 });
  await op.click();
  await page.getByText('/runs', { exact: true }).first().waitFor();
  await page.waitForTimeout(1000);
  await page.screenshot({ path: out('api-docs.png') });

  const query = `{
  account(handle: "demo") {
    handle
    wallet { balanceUsd heldUsd }
  }
  workflows(limit: 3) {
    workflows { name runModel priceUsd }
  }
}`;
  await runInGraphiql(page, origin, query, token, '"demo"');
  await page.screenshot({ path: out('graphiql.png') });
} finally {
  await browser.close();
}
