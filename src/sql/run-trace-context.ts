import { statement } from '../db/statement.ts';
import { RunSchema } from '../db/entities/index.ts';

/** The trace context stored with run $1 (docs/tracing.md), which its spans continue in any process. */
export const RUN_TRACE_CONTEXT = statement('run_trace_context', `select trace_context from runs where id = $1::uuid`, [RunSchema]);
