import { appendFileSync } from 'node:fs';
import * as nodeModule from 'node:module';
import { isMainThread } from 'node:worker_threads';

/**
 * `node --import ./test/helpers/record-loaded-modules.mjs …`: appends the URL of every module the
 * process loads to the file named by LOADED_MODULES_FILE, so a test can say which packages a
 * configuration loads without the service exposing anything for it. Plain JavaScript: worker threads
 * (the Temporal SDK's workflow threads) inherit the option without tsx's loader. Node ≥ 22.15 hooks
 * ESM and CommonJS alike in the thread (registerHooks); an older Node gets an off-thread hook, which
 * sees ESM imports and each CommonJS package's entry module imported from ESM — enough to name it.
 */

const file = process.env.LOADED_MODULES_FILE;
const OFF_THREAD_HOOK = `import { appendFileSync } from 'node:fs';
let file;
export function initialize(data) { file = data; }
export async function load(url, context, nextLoad) { appendFileSync(file, url + '\\n'); return nextLoad(url, context); }`;

if (file && isMainThread) {
  if (nodeModule.registerHooks) {
    nodeModule.registerHooks({
      load(url, context, nextLoad) {
        appendFileSync(file, `${url}\n`);
        return nextLoad(url, context);
      },
    });
  } else {
    nodeModule.register(`data:text/javascript,${encodeURIComponent(OFF_THREAD_HOOK)}`, { data: file });
  }
}
