import { APICallError, streamText, type LanguageModel, type LanguageModelUsage } from 'ai';
import type { Provider } from '../../domain/graph/types.ts';
import { providerFetch, traceStepKind } from '../../observability/trace-spans.ts';
import type { ProviderEnv } from '../../config/config.ts';
import type { NodeExecutionContext, NodeOutcome } from './types.ts';
import { providerCallFailed, timeStep } from '../../observability/metrics.ts';

/**
 * The `llm.chat` activity (docs/design/graph-language.md): renders `prompt` / `system`, streams the model's text through
 * the Vercel AI SDK, forwards every delta to `ctx.onDelta` (awaited, so a slow consumer slows the read)
 * and reports token usage for billing (docs/design/money.md).
 *
 * Endpoints used by the SDK (all overridable with the provider's `*_BASE_URL`):
 * - openai: Responses API, `POST {base}/responses` (the SDK's default model factory in this version).
 * - azure_openai: Responses API on the v1 surface, `POST https://{resource}.openai.azure.com/openai/v1/responses`,
 *   `api-key` header; `AZURE_OPENAI_RESOURCE_NAME` or `AZURE_OPENAI_BASE_URL` is required.
 * - anthropic: `POST {base}/messages`, `x-api-key` header.
 * - google: `POST {base}/models/{model}:streamGenerateContent?alt=sse`, `x-goog-api-key` header.
 * - vertex: express mode with an API key (`x-goog-api-key`), `https://aiplatform.googleapis.com/v1/publishers/google`
 *   unless `VERTEX_BASE_URL` is set; project/location are passed but express mode does not use them.
 *   Service-account (ADC) authentication is not used: a key is always required.
 * - openrouter: Chat Completions, `POST {base}/chat/completions`, `strict` compatibility (asks for usage).
 *
 * Retries are left to the engine (`maxRetries: 0`). Failures carry a buyer-safe reason; cancellation
 * (`ctx.signal`) is rethrown as an `AbortError` so the engine can tell it from a failure.
 */

type ProviderSettings = ProviderEnv[Provider] & { resourceName?: string; project?: string; location?: string };

/** Each provider's SDK is imported by its first step: a process loads only the providers its runs call. */
export async function createLanguageModel(provider: Provider, model: string, apiKey: string, env: ProviderSettings | undefined): Promise<LanguageModel> {
  const baseURL = env?.baseURL || undefined;
  // A client span per provider call, its traceparent sent to the provider (undefined: the SDK's fetch).
  const fetch = providerFetch(provider, model);
  switch (provider) {
    case 'openai':
      return (await import('@ai-sdk/openai')).createOpenAI({ apiKey, baseURL, fetch }).responses(model);
    case 'anthropic':
      return (await import('@ai-sdk/anthropic')).createAnthropic({ apiKey, baseURL, fetch })(model);
    case 'google':
      return (await import('@ai-sdk/google')).createGoogleGenerativeAI({ apiKey, baseURL, fetch })(model);
    case 'azure_openai':
      return (await import('@ai-sdk/azure')).createAzure({ apiKey, baseURL, fetch, resourceName: env?.resourceName || undefined }).responses(model);
    case 'vertex': {
      const { createVertex } = await import('@ai-sdk/google-vertex');
      return createVertex({ apiKey, baseURL, fetch, project: env?.project || undefined, location: env?.location || undefined })(model);
    }
    case 'openrouter':
      return (await import('@openrouter/ai-sdk-provider')).createOpenRouter({ apiKey, baseURL, fetch, compatibility: 'strict' }).chat(model);
    default: {
      const unknown: never = provider;
      throw new Error(`unknown provider ${String(unknown)}`);
    }
  }
}

const REASONS = {
  credentials: 'the model provider rejected the credentials',
  rateLimited: 'the model provider is rate limiting requests',
  unavailable: 'the model provider is unavailable',
  rejected: 'the model provider rejected the request',
  unreadable: 'the model provider sent a response that could not be read',
  generic: 'the model call failed',
} as const;

function failed(reason: string): NodeOutcome {
  return { status: 'failed', reason };
}

export function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof Error && reason.name === 'AbortError') return reason;
  return new DOMException('the node was cancelled', 'AbortError');
}

function statusReason(status: number): string {
  if (status === 401 || status === 403) return REASONS.credentials;
  if (status === 429) return REASONS.rateLimited;
  if (status >= 500) return REASONS.unavailable;
  if (status === 408) return REASONS.unavailable;
  return REASONS.rejected;
}

/** Provider error payloads that arrive inside an otherwise successful stream (Anthropic, OpenAI, …). */
function payloadReason(value: Record<string, unknown>): string | null {
  const inner = value.error && typeof value.error === 'object' ? (value.error as Record<string, unknown>) : value;
  const code = typeof inner.code === 'number' ? inner.code : typeof inner.status === 'number' ? inner.status : undefined;
  if (code !== undefined && code >= 400) return statusReason(code);
  const tag = [inner.type, inner.code, inner.status]
    .filter((v) => typeof v === 'string')
    .join(' ')
    .toLowerCase();
  if (!tag) return null;
  if (/auth|permission|api_key|unauthenticated|forbidden/.test(tag)) return REASONS.credentials;
  if (/rate|quota|resource_exhausted|too_many/.test(tag)) return REASONS.rateLimited;
  if (/overload|server|internal|unavailable|timeout|deadline/.test(tag)) return REASONS.unavailable;
  if (/invalid|not_found|bad_request|context_length/.test(tag)) return REASONS.rejected;
  return null;
}

/**
 * Maps anything the SDK throws or reports to a fixed, buyer-safe sentence. Only status codes, error
 * classes and provider error codes are looked at: messages and bodies can echo the key or the prompt
 * and are never used.
 */
export function generaliseLlmError(error: unknown, depth = 0): string {
  if (depth > 5 || error == null) return REASONS.generic;
  if (APICallError.isInstance(error)) {
    if (error.statusCode !== undefined) return statusReason(error.statusCode);
    return REASONS.unavailable; // no status: the request never got an answer (network, reset, …)
  }
  if (typeof error === 'object') {
    const e = error as Record<string, unknown> & { name?: unknown };
    // RetryError wraps the last attempt.
    if ('lastError' in e && e.lastError !== undefined) return generaliseLlmError(e.lastError, depth + 1);
    const name = typeof e.name === 'string' ? e.name : '';
    // In-stream provider errors (AI_StreamProviderError): the SDK maps them to an HTTP-like status.
    if (name === 'AI_StreamProviderError' || typeof e.statusCode === 'number') {
      if (typeof e.statusCode === 'number') return statusReason(e.statusCode);
      const fromPayload = payloadReason({ type: e.type, code: e.code });
      if (fromPayload) return fromPayload;
      return e.isRetryable === true ? REASONS.unavailable : REASONS.generic;
    }
    if (name === 'AI_LoadAPIKeyError') return REASONS.credentials;
    const unreadable = [
      'AI_JSONParseError',
      'AI_TypeValidationError',
      'AI_InvalidResponseDataError',
      'AI_EmptyResponseBodyError',
      'AI_NoContentGeneratedError',
    ];
    if (unreadable.includes(name)) {
      return REASONS.unreadable;
    }
    if (name === 'AI_LoadSettingError') return 'the model provider is not configured on this service';
    if (error instanceof TypeError && /fetch failed|network|socket|ECONN/i.test(String(e.message))) return REASONS.unavailable;
    if (typeof e.code === 'string' && /^(ECONNREFUSED|ECONNRESET|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|UND_ERR_)/.test(e.code)) return REASONS.unavailable;
    if (!(error instanceof Error)) {
      const fromPayload = payloadReason(e);
      if (fromPayload) return fromPayload;
    }
    if ('cause' in e && e.cause !== undefined) return generaliseLlmError(e.cause, depth + 1);
  }
  return REASONS.generic;
}

function tokens(n: number | undefined): number {
  return typeof n === 'number' && Number.isFinite(n) && n >= 0 ? Math.round(n) : 0;
}

/** The error type a failed call is counted under (wr_provider_call_errors_total): the reason's key. */
const ERROR_TYPES = new Map<string, string>(Object.entries(REASONS).map(([type, reason]) => [reason, type.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)]));

export function executeLlmChat(ctx: NodeExecutionContext): Promise<NodeOutcome> {
  return timeStep('llm.chat', chat, ctx);
}

async function chat(ctx: NodeExecutionContext): Promise<NodeOutcome> {
  const node = ctx.node;
  if (node.kind !== 'llm.chat') return failed(`the node is not an llm.chat node`);
  const { provider, model } = node;
  traceStepKind(node.kind);
  if (ctx.signal.aborted) throw abortError(ctx.signal);

  const env = ctx.providers[provider] as ProviderSettings | undefined;
  let apiKey: string | undefined;
  if (ctx.credentialMode === 'byok') {
    apiKey = ctx.byokKey?.trim();
    if (!apiKey) return { status: 'needs_credentials', provider };
  } else {
    apiKey = env?.apiKey?.trim();
    if (!apiKey) return failed(`the service has no credentials configured for ${provider}`);
  }
  if (provider === 'azure_openai' && !env?.baseURL && !env?.resourceName) {
    return failed('the service has no endpoint configured for azure_openai');
  }

  const prompt = ctx.render(node.prompt);
  const system = node.system !== undefined ? ctx.render(node.system) : undefined;

  let languageModel: LanguageModel;
  try {
    languageModel = await createLanguageModel(provider, model, apiKey, env);
  } catch {
    return failed(`the service is not configured correctly for ${provider}`);
  }

  let text = '';
  let usage: LanguageModelUsage | undefined;
  let streamError: unknown;
  let sawError = false;
  // An error thrown by ctx.onDelta is the engine's own: it propagates unchanged, never as a model failure.
  let sinkFailure: { error: unknown } | undefined;
  try {
    const result = streamText({
      model: languageModel,
      prompt,
      ...(system ? { instructions: system } : {}),
      maxRetries: 0,
      abortSignal: ctx.signal,
      // Errors are read from the stream below; the default handler would log provider bodies.
      onError: () => {},
    });
    for await (const part of result.stream) {
      switch (part.type) {
        case 'text-delta':
          // Nothing more reaches the engine once the node is cancelled, even if already buffered.
          if (ctx.signal.aborted) throw abortError(ctx.signal);
          if (part.text) {
            text += part.text;
            try {
              await ctx.onDelta(part.text);
            } catch (error) {
              sinkFailure = { error };
              throw error;
            }
          }
          break;
        case 'finish':
          usage = part.totalUsage;
          break;
        case 'error':
          if (!sawError) {
            sawError = true;
            streamError = part.error;
          }
          break;
        case 'abort':
          if (ctx.signal.aborted) throw abortError(ctx.signal);
          break;
        default:
          break;
      }
    }
  } catch (error) {
    if (ctx.signal.aborted) throw abortError(ctx.signal);
    if (sinkFailure) throw sinkFailure.error;
    if (!sawError) {
      sawError = true;
      streamError = error;
    }
  }
  if (ctx.signal.aborted) throw abortError(ctx.signal);
  if (sawError) {
    const reason = generaliseLlmError(streamError);
    providerCallFailed(provider, ERROR_TYPES.get(reason) ?? 'other');
    return failed(reason);
  }

  return {
    status: 'completed',
    value: text,
    usage: { provider, model, inputTokens: tokens(usage?.inputTokens), outputTokens: tokens(usage?.outputTokens) },
  };
}
