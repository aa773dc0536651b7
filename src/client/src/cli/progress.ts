import type { RunStreamItem } from '../stream.ts';
import { isTerminal, type Run } from '../types.ts';
import { charge, showValue, styles, suspension } from './format.ts';

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

interface Out {
  write(s: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

/**
 * Live progress of one run from its stream. On a terminal: a spinner line per running node showing the
 * tail of its text as it arrives, replaced by a done / failed / skipped line (with the node's full text)
 * when the node ends. Elsewhere (a pipe, a log): plain lines, with the text written as it arrives.
 * With `nodes: false` only the run's own status changes are shown (`wr run --wait`). A suspension says
 * why and what ends it.
 */
export class Progress {
  readonly #out: Out;
  readonly #tty: boolean;
  readonly #s: ReturnType<typeof styles>;
  /** Running nodes (insertion order) and their text so far. */
  readonly #running = new Map<string, string>();
  #liveLines = 0;
  #frame = 0;
  #timer: ReturnType<typeof setInterval> | null = null;
  /** Plain mode: the node whose text the current line continues, if any. */
  #streaming: string | null = null;
  #status = '';
  readonly #nodes: boolean;
  #runId = '';

  constructor(out: Out, opts: { nodes?: boolean } = {}) {
    this.#out = out;
    this.#nodes = opts.nodes ?? true;
    this.#tty = Boolean(out.isTTY);
    this.#s = styles(this.#tty);
    if (this.#tty) {
      this.#timer = setInterval(() => this.#redraw(), 80);
      this.#timer.unref();
    }
  }

  handle(item: RunStreamItem): void {
    const s = this.#s;
    if (item.type === 'snapshot') {
      this.#runId = item.run.id;
      // A run that already ended is replayed from its log; its status comes with the summary.
      const status = isTerminal(item.run.status) ? '' : ` ${s.dim(`· ${this.#describe(item.run)}`)}`;
      if (item.connection === 1) this.#line(`${s.bold('run')} ${item.run.id}${status}`);
      this.#status = this.#describe(item.run);
      return;
    }
    if (item.type === 'reconnecting') {
      this.#line(s.yellow(`connection lost (${(item.error as Error)?.message ?? item.error}); resuming after event ${item.after}`));
      return;
    }
    const { event } = item;
    const node = event.nodeId ?? '';
    const reason = typeof event.data.reason === 'string' ? event.data.reason : null;
    if (!this.#nodes && event.type.startsWith('node.')) return;
    switch (event.type) {
      case 'run.started':
        this.#status = 'running';
        return this.#line(s.dim('run started'));
      case 'run.suspended':
        this.#status = `suspended${reason ? ` (${reason})` : ''}`;
        return this.#line(s.yellow(`run suspended${reason ? ` (${reason})` : ''}`) + suspension(reason, this.#runId));
      case 'run.resumed':
        this.#status = 'running';
        return this.#line(s.dim('run resumed'));
      case 'node.started':
        this.#running.set(node, '');
        if (!this.#tty) this.#line(`… ${node} started`);
        return this.#redraw();
      case 'node.output.delta':
        this.#running.set(node, item.output ?? '');
        if (!this.#tty) this.#plainText(node, String(event.data.text ?? ''));
        return this.#redraw();
      case 'node.completed':
        return this.#end(node, s.green('✔'), 'done', item.output);
      case 'node.failed':
        return this.#end(node, s.red('✖'), `failed${reason ? `: ${reason}` : ''}`, item.output);
      case 'node.skipped':
        return this.#end(node, s.dim('○'), `skipped${reason ? ` (${reason})` : ''}`, null);
      default:
        this.#status = typeof event.data.status === 'string' ? event.data.status : this.#status;
    }
  }

  /** The run's end: status, outcome, charge and outputs. */
  summary(run: Run): void {
    this.stop();
    const s = this.#s;
    const mark = run.status === 'completed' ? s.green('✔') : s.red('✖');
    const parts = [s.bold(run.status), run.outcome && run.outcome !== run.status ? `outcome ${run.outcome}` : null, run.reason, charge(run)];
    this.#line(`${mark} ${parts.filter(Boolean).join(' · ')}`);
    for (const o of run.outputs) this.#line(`  ${s.cyan(o.name)}: ${showValue(o.value)}`);
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    this.#running.clear();
    this.#redraw();
    this.#closeText();
  }

  #describe(run: Run): string {
    if (run.queue) return run.queue.state === 'waiting' ? `pending (in queue, position ${run.queue.position})` : 'pending (starting)';
    return run.status;
  }

  #end(node: string, mark: string, what: string, text: string | null): void {
    this.#running.delete(node);
    if (this.#tty) {
      const body = text ? `\n${indent(text)}` : '';
      this.#line(`${mark} ${node} ${this.#s.dim(what)}${body}`);
    } else {
      this.#line(`${mark} ${node} ${what}`);
    }
    this.#redraw();
  }

  #plainText(node: string, text: string): void {
    if (this.#streaming !== node) {
      this.#closeText();
      this.#out.write(`  ${node} │ `);
      this.#streaming = node;
    }
    this.#out.write(text.replace(/\n/g, `\n  ${node} │ `));
  }

  #closeText(): void {
    if (this.#streaming !== null) this.#out.write('\n');
    this.#streaming = null;
  }

  /** A permanent line above the live area. */
  #line(text: string): void {
    this.#clearLive();
    this.#closeText();
    this.#out.write(`${text}\n`);
    this.#redraw();
  }

  #clearLive(): void {
    if (this.#tty && this.#liveLines > 0) this.#out.write(`\x1b[${this.#liveLines}A\x1b[J`);
    this.#liveLines = 0;
  }

  #redraw(): void {
    if (!this.#tty) return;
    this.#clearLive();
    if (this.#running.size === 0) return;
    const width = Math.max(20, (this.#out.columns ?? 80) - 1);
    const frame = FRAMES[this.#frame++ % FRAMES.length]!;
    const lines = [...this.#running].map(([node, text]) => {
      const tail = text.replace(/\s+/g, ' ').trim();
      const room = width - node.length - 4;
      return `${this.#s.cyan(frame)} ${node}${tail ? ` ${this.#s.dim(tail.length > room ? `…${tail.slice(-(room - 1))}` : tail)}` : ''}`;
    });
    lines.push(this.#s.dim(`  run ${this.#status}`));
    this.#out.write(`${lines.join('\n')}\n`);
    this.#liveLines = lines.length;
  }
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((l) => `    ${l}`)
    .join('\n');
}
