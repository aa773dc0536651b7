import { query } from '../db/statement.ts';
import { RUN_TRACE_CONTEXT } from '../sql/run-trace-context.ts';
import { fork, type RunsDeps } from './deps.ts';

/** The trace context stored with a run when it was accepted (docs/tracing.md), or undefined. */
export async function readRunTraceContext(deps: Pick<RunsDeps, 'orm'>, runId: string): Promise<unknown> {
  const rows = await query<{ trace_context: unknown }>(fork(deps), RUN_TRACE_CONTEXT, [runId]);
  return rows[0]?.trace_context;
}
