import type { Em } from '../../db/orm.ts';
import type { RunOutputField } from '../../domain/graph/types.ts';
import { toDb, usd } from '../../domain/money.ts';
import { settleRun } from '../billing/settle-run.ts';
import { appendRunEvents } from '../events/append-run-events.ts';
import { enqueueRunWebhooks } from '../webhooks/enqueue-run-webhooks.ts';
import { mapRunRow, RUN_COLUMNS, toPublicRun } from './run-views.ts';

/**
 * The one way a run becomes terminal, used by the engines and by cancellation. Inside the caller's
 * transaction it locks the run, refuses if it is already terminal (a late step or a late cancel never
 * changes a finished run), settles money exactly once, writes the terminal event and the webhook outbox
 * rows, and deletes the run's secrets. Returns the new last sequence, or null when it changed nothing.
 */

export interface Finish {
  status: 'completed' | 'failed' | 'cancelled';
  outcome?: 'completed' | 'completed_with_issues' | null;
  reason?: string | null;
  outputs?: RunOutputField[];
  /**
   * What is charged (contract §5): `none` (cancelled, queue timeout, insufficient funds), `compute`
   * (compute of completed steps: completed_with_issues, node failures, compute limit), `full`
   * (creator price if charged to this caller + compute).
   */
  charge: 'none' | 'compute' | 'full';
}

export async function finishRun(tx: Em, runId: string, fin: Finish): Promise<number | null> {
  const [row] = await tx.execute<Record<string, unknown>[]>(
    `select account_id, status, funding, bundle_id, hold_usd, compute_usd, creator_price_usd, workflow_id
       from runs where id = ? for update`,
    [runId],
  );
  if (!row || ['completed', 'failed', 'cancelled'].includes(String(row.status))) return null;

  const compute = usd(String(row.compute_usd));
  let charge: string | null = null;
  if (fin.charge === 'full') charge = toDb(usd(String(row.creator_price_usd)).plus(compute));
  else if (fin.charge === 'compute') charge = compute.isZero() && fin.status !== 'completed' ? null : toDb(compute);
  if (fin.status === 'completed' && charge === null) charge = toDb(0);

  const accountId = String(row.account_id);
  const finalCharge = await settleRun(
    tx,
    { id: runId, accountId, funding: (row.funding as string | null) ?? null, bundleId: (row.bundle_id as string | null) ?? null, holdUsd: String(row.hold_usd) },
    charge,
  );
  const billing = finalCharge === null ? 'not_charged' : 'settled';

  const [updated] = await tx.execute<Record<string, unknown>[]>(
    `update runs set status = ?, outcome = ?, reason = ?, outputs = coalesce(?::jsonb, outputs), billing_status = ?,
            charge_usd = ?, cap_usd = ?, phase = null, suspend_reason = null, resume_at = null,
            lease_owner = null, lease_until = null, completed_at = clock_timestamp(), updated_at = now()
      where id = ? returning ${RUN_COLUMNS}`,
    [
      fin.status,
      fin.status === 'completed' ? (fin.outcome ?? 'completed') : null,
      fin.status === 'failed' ? (fin.reason ?? 'the run failed') : null,
      fin.outputs ? JSON.stringify(fin.outputs) : null,
      billing,
      finalCharge,
      finalCharge ?? '0',
      runId,
    ],
  );
  if (fin.status === 'completed') {
    await tx.execute('update workflows set runs_count = runs_count + 1 where id = ?', [row.workflow_id]);
  }
  await tx.execute('delete from run_secrets where run_id = ?', [runId]);

  const type = `run.${fin.status}`;
  const data: Record<string, string> = { status: fin.status };
  if (fin.status === 'failed') data.reason = fin.reason ?? 'the run failed';
  const last = await appendRunEvents(tx, runId, [{ type, data }]);
  const run = toPublicRun(mapRunRow({ ...updated!, last_sequence: last }), null);
  await enqueueRunWebhooks(tx, accountId, runId, type, run);
  return last;
}
