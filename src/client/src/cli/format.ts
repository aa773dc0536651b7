import { ApiError, ConnectionError } from '../errors.ts';
import type { InputErrorDetail, IntegrationErrorDetail, Run } from '../types.ts';

/** ANSI styling, only on a terminal and without NO_COLOR. */
export function styles(tty: boolean) {
  const on = tty && !process.env.NO_COLOR;
  const wrap = (open: number, close: number) => (s: string) => (on ? `\x1b[${open}m${s}\x1b[${close}m` : s);
  return { green: wrap(32, 39), red: wrap(31, 39), yellow: wrap(33, 39), dim: wrap(2, 22), bold: wrap(1, 22), cyan: wrap(36, 39) };
}

/** Columns padded to their widest cell; the last column is not padded. */
export function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(head), ...rows.map(line)].join('\n');
}

export function usd(n: number | null | undefined): string {
  return n === null || n === undefined ? '—' : `$${n}`;
}

export function charge(run: Pick<Run, 'displayedChargeUsd' | 'billingStatus'>): string {
  if (run.billingStatus === 'not_charged') return 'not charged';
  if (run.displayedChargeUsd === null) return `charge ${run.billingStatus}`;
  return `charged ${usd(run.displayedChargeUsd)}`;
}

/** An output value on one line: strings as they are, anything else as JSON. */
export function showValue(v: unknown): string {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

/**
 * Why a suspended run waits and what ends the wait, after `run suspended (REASON)`. A BYOK run without
 * a usable key (`wait_signal`) waits for the buyer: its credentials are supplied through the service's
 * GraphQL mutation `supplyRunCredentials`, or the run is cancelled; a timer ends by itself.
 */
export function suspension(reason: string | null, runId: string): string {
  if (reason === 'wait_timer') return ': a timer; it resumes by itself';
  if (reason !== 'wait_signal') return '';
  return (
    ': it waits for provider credentials (the workflow runs on your own provider key)\n' +
    `  supply them (GraphQL supplyRunCredentials, runId ${runId}) and it resumes, or cancel it: wr runs cancel ${runId}`
  );
}

/** One line (no stack) for any failure the CLI reports. */
export function oneLine(err: unknown, context: { workflow?: string } = {}): string {
  if (err instanceof ApiError) {
    if (err.code === 'not_found' && context.workflow) return `unknown workflow ${context.workflow} (not_found: ${err.message})`;
    if (err.code === 'invalid_inputs' && err.details?.length) {
      const items = (err.details as InputErrorDetail[]).map((d) => `${d.input}: ${d.message}`);
      return `invalid inputs: ${items.join('; ')}`;
    }
    if (err.code === 'integration_connection_required' && err.details?.length) {
      const items = (err.details as IntegrationErrorDetail[]).map((d) => `${d.provider} (connect at ${d.connectUrl})`);
      return `${err.message}: ${items.join(', ')}`;
    }
    if (err.code === 'unauthorized') return `the API key was refused (unauthorized: ${err.message}); check WR_API_KEY`;
    return `${err.message} (${err.code}, HTTP ${err.status}${err.requestId ? `, request ${err.requestId}` : ''})`;
  }
  if (err instanceof ConnectionError) return `${err.message} (is the service running? set WR_BASE_URL)`;
  return (err as Error)?.message ?? String(err);
}
