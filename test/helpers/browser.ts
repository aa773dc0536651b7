import { chromium, type Browser, type Page } from 'playwright-core';

/**
 * Headless Chromium (Debian's `chromium`, or CHROMIUM_PATH) through playwright-core, for the tests of the
 * browser pages and the screenshot script (docs/images/README.md). A browser that does not start is a
 * failure with the reason, unless BROWSER_UNAVAILABLE=1 says this machine has none (then `null`).
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

export async function launchChromium(): Promise<Browser | null> {
  const executablePath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
  try {
    return await chromium.launch({ executablePath, args: CHROMIUM_ARGS, timeout: 60_000 });
  } catch (err) {
    const why = `headless Chromium (${executablePath}) did not start: ${(err as Error).message}`;
    if (process.env.BROWSER_UNAVAILABLE === '1') {
      console.log(`  browser tests skipped (BROWSER_UNAVAILABLE=1) — ${why}`);
      return null;
    }
    throw new Error(`${why}\nInstall Chromium (apt-get install -y chromium), point CHROMIUM_PATH at one, or set BROWSER_UNAVAILABLE=1 to skip.`);
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
