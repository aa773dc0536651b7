import { parse } from 'uvu/parse';
import { run } from 'uvu/run';
import { closeTestOrm } from './helpers/db.ts';

/**
 * uvu's CLI, minus its habit of waiting for open handles: after the last suite the shared database is
 * closed and the process exits with uvu's code, so a leaked timer can never hang CI.
 */
const pattern = process.argv[2] ?? '\\.test\\.ts$';
const ctx = await parse('test', new RegExp(pattern), { cwd: process.cwd(), ignore: [/helpers/, /fixtures/] });
await run(ctx.suites, { bail: false });
const code = Number(process.exitCode ?? 0);
// Imported only now: it imports uvu, which must first be loaded by uvu/run (deferred mode), or every
// suite would start at once.
const temporal = (await import('./helpers/temporal.ts')).temporalSummary();
if (temporal) console.log(`\n${temporal}`);
await closeTestOrm().catch(() => undefined);
process.exit(code);
