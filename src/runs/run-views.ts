import type { Em } from '../db/orm.ts';
import { isoOrNull, json } from '../db/sql.ts';
import { ApiError } from '../domain/errors.ts';
import { query, type StatementEm } from '../db/statement.ts';
import { FIND_ACCOUNT_RUN, FIND_RUN } from '../sql/runs.ts';
import { READ_RUN_EVENTS } from '../sql/run-events.ts';
import { mapRunRow, toPublicRun, type RunRow } from './run-row.ts';

export { mapRunRow, toPublicRun, type PublicRun, type RunQueue, type RunRow } from './run-row.ts';

/** The spec's Run, RunListItem, AcceptedRun and RunEvent shapes, built from rows. */

export interface AcceptedRun {
  id: string;
  status: 'accepted';
  statusUrl: string;
  eventsUrl: string;
  streamUrl: string;
}

export function runUrls(baseUrl: string, runId: string) {
  const statusUrl = `${baseUrl}/runs/${runId}`;
  return { statusUrl, eventsUrl: `${statusUrl}/events`, streamUrl: `${statusUrl}/stream` };
}

/** A run of this account, or null (another account's run is as unknown as a missing one). */
export async function findAccountRun(em: StatementEm, accountId: string, runId: string): Promise<RunRow | null> {
  const rows = await query(em, FIND_ACCOUNT_RUN, [runId, accountId]);
  return rows[0] ? mapRunRow(rows[0]) : null;
}

export async function findRun(em: Em, runId: string): Promise<RunRow | null> {
  const rows = await query(em, FIND_RUN, [runId]);
  return rows[0] ? mapRunRow(rows[0]) : null;
}

/** Outputs beyond MAX_OUTPUT_BYTES are not returned inline (docs/design/rules.md, `output_too_large`). */
export function assertOutputsFit(run: RunRow, maxBytes: number): void {
  if (run.outputs.length === 0) return;
  const size = Buffer.byteLength(JSON.stringify(run.outputs));
  if (size > maxBytes) {
    throw new ApiError('output_too_large', `the run's outputs are ${size} bytes, more than the ${maxBytes} bytes that can be returned inline`);
  }
}

export function toRunListItem(run: RunRow) {
  // A list item is the Run without its reason, queue and outputs, and with `suspended` shown as running.
  const { id, workflowId, workflowVersionId, startedAt, completedAt, displayedChargeUsd, billingStatus, outcome, metadata, deadline } = toPublicRun(run, null);
  const status = run.status === 'suspended' ? ('running' as const) : run.status;
  return { id, status, workflowId, workflowVersionId, startedAt, completedAt, displayedChargeUsd, billingStatus, outcome, metadata, deadline };
}

export interface PublicRunEvent {
  type: string;
  sequence: number;
  ts: string;
  nodeId: string | null;
  data: Record<string, string>;
}

export function mapEventRow(r: Record<string, unknown>): PublicRunEvent {
  return {
    type: String(r.type),
    sequence: Number(r.sequence),
    ts: isoOrNull(r.ts)!,
    nodeId: (r.node_id as string | null) ?? null,
    data: json<Record<string, string>>(r.data),
  };
}

/** Events after a sequence, in order, at most `limit`. */
export async function readEvents(em: StatementEm, runId: string, afterSequence: number, limit: number): Promise<PublicRunEvent[]> {
  const rows = await query(em, READ_RUN_EVENTS, [runId, afterSequence, limit]);
  return rows.map(mapEventRow);
}
