import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';

/**
 * Headless Chromium through playwright-core, for the tests of the browser pages and the screenshot script
 * (docs/images/README.md): CHROMIUM_PATH, else the system's `chromium`, else the headless shell that the
 * `@sparticuz/chromium` dev dependency carries (so `npm ci` alone is enough). A browser that does not start
 * is a failure with the reason, unless BROWSER_UNAVAILABLE=1 says this machine has none (then `null`).
 */

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

const SYSTEM_CHROMIUM = '/usr/bin/chromium';

/** The browser to launch, in order of preference; the packaged one is unpacked (once per machine) only when needed. */
async function chromiumExecutable(): Promise<string> {
  if (process.env.CHROMIUM_PATH) return process.env.CHROMIUM_PATH;
  if (existsSync(SYSTEM_CHROMIUM)) return SYSTEM_CHROMIUM;
  const { default: packaged } = await import('@sparticuz/chromium');
  return packaged.executablePath();
}

export async function launchChromium(): Promise<Browser | null> {
  let executablePath = 'the packaged @sparticuz/chromium';
  try {
    executablePath = await chromiumExecutable();
    return await chromium.launch({ executablePath, args: CHROMIUM_ARGS, timeout: 60_000 });
  } catch (err) {
    const why = `headless Chromium (${executablePath}) did not start: ${(err as Error).message}`;
    if (process.env.BROWSER_UNAVAILABLE === '1') {
      console.log(`  browser tests skipped (BROWSER_UNAVAILABLE=1) — ${why}`);
      return null;
    }
    throw new Error(
      `${why}\nRun npm ci (it installs @sparticuz/chromium), install a system Chromium, point CHROMIUM_PATH at one, or set BROWSER_UNAVAILABLE=1 to skip.`,
    );
  }
}

/** Opens the explorer on `query`, types the token into its Headers editor, runs it and returns the result pane's text once it shows `expect`. */
export async function runInGraphiql(page: Page, origin: string, query: string, token: string, expect: string): Promise<string> {
  await page.goto(`${origin}/graphql?query=${encodeURIComponent(query)}`);
  const headers = page.locator('.graphiql-editor-tool .CodeMirror').last();
  await headers.waitFor({ timeout: 60_000 });
  await headers.click();
  await page.keyboard.press('Control+A');
  await page.keyboard.press('Delete');
  // CodeMirror closes brackets and quotes as they are typed: type the header without them, then check.
  await page.keyboard.insertText(`{"Authorization": "Bearer ${token}"}`);
  await page.locator('.graphiql-execute-button').click();
  const result = page.locator('.result-window');
  await result.getByText(expect).first().waitFor({ timeout: 60_000 });
  return result.innerText();
}
