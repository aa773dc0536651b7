import type { Em } from '../db/orm.ts';
import { json } from '../db/sql.ts';
import { query } from '../db/statement.ts';
import { NODE_STREAM_SO_FAR } from '../sql/run-events.ts';
import { READ_RUN_SECRETS } from '../sql/run-secrets.ts';
import { ACCOUNT_PROVIDER_KEY } from '../sql/provider-keys.ts';
import { renderTemplate } from '../domain/graph/template.ts';
import { isStepKind, type Graph, type GraphNode, type NodeResult } from '../domain/graph/types.ts';
import { usd, ZERO, type Usd } from '../domain/money.ts';
import { resultEvent, valueLookup, type NewRunEvent } from '../domain/run-steps.ts';
import { fork, type RunsDeps } from '../runs/deps.ts';
import { hasSuppliedCredential } from '../runs/credentials.ts';
import { fencedWrite, publish, recordResult } from '../runs/fenced-write.ts';
import { explainRefusal, executeSyncStep, failForComputeLimit, recordKnownSyncStep, type StepArgs, type StepOutcome } from '../runs/record-step.ts';
import { graphOf, readRun, type RunRowLite } from '../runs/run-state.ts';
import { getPricing } from '../catalog/pricing.ts';
import { DeltaSink, RunNotWritable } from './delta-sink.ts';
import type { LlmUsage, NodeExecutionContext, NodeOutcome } from './nodes/types.ts';

/**
 * Executing one step node for either engine: text.template / json.parse are recorded by the runs module
 * in one statement; llm.chat / http.request run their node executor (src/engine/nodes/) outside any
 * transaction, with node.started, streamed deltas and the result written through the runs module.
 */

/**
 * Executes one step node. The compute limit is checked first: when the run's compute plus one step
 * would exceed its limit, the step does not start (no `node.started`) and the run fails, charged the
 * compute used. Otherwise: `node.started`, the node's work (deltas streamed as `node.output.delta`),
 * then the result, its compute (one step plus service-hosted LLM usage) and `node.completed` /
 * `node.failed` in one statement fenced on the run not being terminal and the node having no result.
 * A node that already has a result is returned as it is, without running again. `signal` aborts the
 * node's I/O; the call then throws.
 */
export async function executeStep(deps: RunsDeps, args: StepArgs, signal?: AbortSignal): Promise<StepOutcome> {
  const { runId, nodeId } = args;
  const em = fork(deps);
  const known = await recordKnownSyncStep(deps, args, signal);
  if (known) return known;
  const run = await readRun(em, runId);
  if (!run) return { type: 'not_runnable', status: null };
  const existing = run.progress.results[nodeId];
  if (existing) return { type: 'recorded', result: existing };
  if (run.status !== 'running') return { type: 'not_runnable', status: run.status };
  const graph = await graphOf(em, run.versionId);
  const node = graph.nodes.find((n) => n.id === nodeId);
  if (!node || !isStepKind(node.kind)) throw new Error(`node ${nodeId} is not a step of run ${runId}`);
  if (!run.nextStepFits) return failForComputeLimit(deps, runId, nodeId);
  if (node.kind === 'text.template' || node.kind === 'json.parse') {
    return executeSyncStep(deps, em, runId, graph, node, run.progress.results, run.inputs, signal);
  }
  return executeAsync(deps, em, runId, run, graph, node, signal ?? new AbortController().signal);
}

async function usageCost(em: Em, credentialMode: string, usage: LlmUsage | undefined): Promise<Usd> {
  if (!usage || credentialMode === 'byok') return ZERO;
  const price = (await getPricing(em)).models[usage.model];
  if (!price) return ZERO;
  return usd(usage.inputTokens)
    .times(usd(price.input))
    .plus(usd(usage.outputTokens).times(usd(price.output)))
    .dividedBy(1_000_000);
}

function resultOf(outcome: Extract<NodeOutcome, { status: 'completed' | 'failed' }>): NodeResult {
  return outcome.status === 'completed' ? { status: 'completed', value: outcome.value } : { status: 'failed', reason: outcome.reason };
}

/** llm.chat and http.request: I/O outside any transaction, streamed deltas, then the result. */
async function executeAsync(
  deps: RunsDeps,
  em: Em,
  runId: string,
  run: RunRowLite,
  graph: Graph,
  node: GraphNode,
  signal: AbortSignal,
  attempt = 0,
): Promise<StepOutcome> {
  const nodeId = node.id;
  // A re-execution (after a crash or a wait_signal) continues the node's log instead of repeating it.
  const prior = await query<{ type: string; data: unknown }>(em, NODE_STREAM_SO_FAR, [runId, nodeId]);
  const startedBefore = prior.some((e) => e.type === 'node.started');
  const published = prior.filter((e) => e.type === 'node.output.delta').reduce((n, e) => n + String(json<{ text?: string }>(e.data)?.text ?? '').length, 0);

  if (!startedBefore) {
    const started = await fencedWrite(em, runId, {
      statuses: ['running'],
      absentResults: [nodeId],
      computeLimitSteps: 1,
      events: [{ type: 'node.started', nodeId }],
    });
    if (started === null) return explainRefusal(deps, runId, nodeId);
    publish(deps, runId, started);
  }

  const ctx = await executionContext(deps, em, runId, run, graph, node, signal);
  const sink = new DeltaSink(deps, runId, nodeId, published);
  ctx.onDelta = sink.push;
  let outcome: NodeOutcome;
  try {
    outcome = await (await nodeExecutor(node.kind))(ctx);
  } catch (error) {
    await sink.close();
    if (error instanceof RunNotWritable) return explainRefusal(deps, runId, nodeId);
    if (signal.aborted) throw error;
    deps.log.error({ err: error, runId, accountId: run.accountId, nodeId }, 'a step failed unexpectedly');
    outcome = { status: 'failed', reason: 'the step failed unexpectedly' };
  }
  let leftover: NewRunEvent[];
  try {
    leftover = await sink.drain();
  } catch (error) {
    if (error instanceof RunNotWritable) return explainRefusal(deps, runId, nodeId);
    throw error;
  }
  signal.throwIfAborted();

  if (outcome.status === 'needs_credentials') {
    // Fenced on no credentials for this provider having been supplied meanwhile (they would otherwise
    // arrive before the suspension and never resume it).
    const suspended = await fencedWrite(em, runId, {
      statuses: ['running'],
      absentResults: [nodeId],
      noCredentialFor: outcome.provider,
      move: { to: 'suspend', reason: 'wait_signal', resumeAt: null },
      events: [...leftover, { type: 'run.suspended', data: { status: 'suspended', reason: 'wait_signal' } }],
    });
    if (suspended !== null) {
      publish(deps, runId, suspended);
      return { type: 'suspended', reason: 'wait_signal' };
    }
    const now = await readRun(em, runId);
    if (now?.status === 'suspended') return { type: 'suspended', reason: 'wait_signal' };
    if (now?.status === 'running' && !now.progress.results[nodeId] && attempt === 0 && (await hasSuppliedCredential(em, runId, outcome.provider))) {
      return executeAsync(deps, em, runId, now, graph, node, signal, attempt + 1);
    }
    return explainRefusal(deps, runId, nodeId);
  }

  const result = resultOf(outcome);
  const compute =
    result.status === 'completed' ? { extra: await usageCost(em, run.credentialMode, outcome.status === 'completed' ? outcome.usage : undefined) } : null;
  const recorded = await fencedWrite(em, runId, {
    statuses: ['running', 'suspended'],
    absentResults: [nodeId],
    ...recordResult(nodeId, result, compute),
    events: [...leftover, resultEvent(nodeId, result)],
  });
  if (recorded === null) return explainRefusal(deps, runId, nodeId);
  publish(deps, runId, recorded);
  return { type: 'recorded', result };
}

/**
 * The executor of an llm.chat or http.request step, imported with the first such step: the AI SDK with
 * its providers, and undici, stay out of a process whose runs never call them.
 */
async function nodeExecutor(kind: GraphNode['kind']): Promise<(ctx: NodeExecutionContext) => Promise<NodeOutcome>> {
  return kind === 'llm.chat' ? (await import('./nodes/llm-chat.ts')).executeLlmChat : (await import('./nodes/http-request.ts')).executeHttpRequest;
}

/** The context an llm.chat / http.request activity runs with: rendering with secrets, BYOK key. */
async function executionContext(
  deps: RunsDeps,
  em: Em,
  runId: string,
  run: RunRowLite,
  graph: Graph,
  node: GraphNode,
  signal: AbortSignal,
): Promise<NodeExecutionContext> {
  const secrets = await query<{ kind: string; name: string; ciphertext: string }>(em, READ_RUN_SECRETS, [runId]);
  const passwordIds = new Set(graph.nodes.filter((n) => n.kind === 'input.password').map((n) => n.id));
  const passwords = new Map<string, string>();
  let byokKey: string | undefined;
  const provider = node.kind === 'llm.chat' ? node.provider : undefined;
  for (const s of secrets) {
    if (s.kind === 'password_input' && passwordIds.has(s.name)) passwords.set(s.name, deps.sealer.open(s.ciphertext));
    if (s.kind === 'provider_credential' && provider && s.name === provider) byokKey = deps.sealer.open(s.ciphertext);
  }
  for (const id of passwordIds) if (!passwords.has(id)) passwords.set(id, '');
  if (provider && run.credentialMode === 'byok' && byokKey === undefined) {
    const [stored] = await query<{ ciphertext: string }>(em, ACCOUNT_PROVIDER_KEY, [run.accountId, provider]);
    if (stored) byokKey = deps.sealer.open(stored.ciphertext);
  }
  const lookup = valueLookup(graph, run.progress.results, run.inputs, passwords);
  return {
    runId,
    node,
    render: (template: string) => renderTemplate(template, lookup),
    credentialMode: run.credentialMode,
    byokKey,
    providers: deps.config.providers,
    allowPrivateNetwork: deps.config.allowPrivateNetwork,
    onDelta: () => undefined,
    signal,
  };
}
