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
}
