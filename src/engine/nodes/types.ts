import type { GraphNode, JsonValue, Provider } from '../../domain/graph/types.ts';
import type { ProviderEnv } from '../../config/config.ts';

/** What an activity needs to execute one step node. Built by the engine; never persisted. */
export interface NodeExecutionContext {
  runId: string;
  node: GraphNode;
  /** Renders a template of this node with upstream values and (for password inputs) decrypted secrets. */
  render: (template: string) => string;
  credentialMode: 'service_hosted' | 'byok';
  /** BYOK: the caller's key for this node's provider (stored provider key or one supplied to the run). */
  byokKey?: string;
  /** Service-hosted provider keys and endpoints from the environment. */
  providers: ProviderEnv;
  allowPrivateNetwork: boolean;
  /** Streams a chunk of the node's output (becomes a `node.output.delta` event). */
  onDelta: (text: string) => void | Promise<void>;
  signal: AbortSignal;
}

export interface LlmUsage {
  provider: Provider;
  model: string;
  inputTokens: number;
  outputTokens: number;
}

export type NodeOutcome =
  | { status: 'completed'; value: JsonValue; usage?: LlmUsage }
  /** `reason` is buyer-safe: provider detail generalised, no secrets, no stack traces. */
  | { status: 'failed'; reason: string }
  /** BYOK run without a usable key: the run suspends with wait_signal until credentials are supplied. */
  | { status: 'needs_credentials'; provider: Provider };
