import { readFileSync } from 'node:fs';
import type { StartRunsItem, StartRunsOutcome } from '../types.ts';
import { clientFrom, EXIT, type Io } from './commands.ts';
import { UsageError } from './inputs.ts';

/** Runs per POST /runs/batch (the API's bound). */
const BATCH = 1000;
const BAR = 30;

export interface BatchOpts {
  idempotencyKey?: string;
  cancelAfter?: string;
  startAfter?: string;
  json?: boolean;
}

/**
 * `wr batch FILE.jsonl`: one run a line (what POST /runs takes), started in batches of 1,000, with a
 * progress bar on stderr and one result line per run on stdout, in file order. Exit code 1 when any run
 * was refused. With `--idempotency-key K` batch n is sent under `K:n`, so rerunning the same command
 * after a failure starts nothing twice.
 */
export async function batch(io: Io, file: string, opts: BatchOpts): Promise<number> {
  const items = readItems(file === '-' ? readFileSync(0, 'utf8') : readFileSync(file, 'utf8'));
  if (items.length === 0) throw new UsageError(`${file} holds no runs (one JSON object a line)`);
  const client = clientFrom(io.env);
  const bar = progress(io, items.length);
  let refused = 0;
  for (let start = 0, n = 0; start < items.length; start += BATCH, n++) {
    const chunk = items.slice(start, start + BATCH);
    const key = opts.idempotencyKey ? `${opts.idempotencyKey}:${n}` : undefined;
    const answer = await client.startRuns(
      chunk.map((i) => i.run),
      { idempotencyKey: key, cancelAfter: opts.cancelAfter, startAfter: opts.startAfter },
    );
    for (const outcome of answer.items) {
      const line = chunk[outcome.index]!.line;
      if ('error' in outcome) refused++;
      io.stdout.write(`${opts.json ? JSON.stringify({ line, ...outcome, index: undefined }) : resultLine(line, outcome)}\n`);
    }
    bar(start + chunk.length);
  }
  io.stderr.write(`${items.length - refused} accepted, ${refused} refused\n`);
  return refused > 0 ? EXIT.error : EXIT.ok;
}

/** The file's runs with their line numbers; a line that is not a JSON object is a usage error naming it. */
function readItems(text: string): { line: number; run: StartRunsItem }[] {
  const items: { line: number; run: StartRunsItem }[] = [];
  text.split('\n').forEach((raw, i) => {
    if (raw.trim() === '') return;
    let run: unknown;
    try {
      run = JSON.parse(raw);
    } catch {
      throw new UsageError(`line ${i + 1} is not JSON`);
    }
    if (run === null || typeof run !== 'object' || Array.isArray(run)) throw new UsageError(`line ${i + 1} is not a JSON object`);
    items.push({ line: i + 1, run: run as StartRunsItem });
  });
  return items;
}

function resultLine(line: number, outcome: StartRunsOutcome): string {
  if ('run' in outcome) return `${line}\taccepted\t${outcome.run.id}`;
  return `${line}\trefused\t${outcome.error.code}: ${outcome.error.message}`;
}

/** A bar on stderr: redrawn in place on a terminal, a line per batch elsewhere. */
function progress(io: Io, total: number): (done: number) => void {
  const tty = Boolean(io.stderr.isTTY);
  return (done) => {
    const filled = Math.round((done / total) * BAR);
    const text = `[${'#'.repeat(filled)}${'.'.repeat(BAR - filled)}] ${done}/${total} runs sent`;
    io.stderr.write(tty ? `\r${text}${done === total ? '\n' : ''}` : `${text}\n`);
  };
}
