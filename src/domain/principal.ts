import type { FlowAllowance } from './run-flow-control.ts';

/** The caller behind a bearer key. */
export interface Principal {
  apiKeyId: string;
  accountId: string;
  accountHandle: string;
  scopes: string[];
  rateLimitPerMinute: number;
  /** Runs a minute the key's batches may start (docs/design/batch-runs.md#run-budget). */
  runBudgetPerMinute: number;
  spendCap: { window: 'daily' | 'monthly' | 'lifetime'; usd: string } | null;
  /** Whether its runs may have high priority, and its bound per concurrency key (docs/design/flow-control.md). */
  flow: FlowAllowance;
}
