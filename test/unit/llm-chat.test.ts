import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { ProviderEnv } from '../../src/config/config.ts';
import { PROVIDERS, type LlmNode, type Provider } from '../../src/domain/graph/types.ts';
import { executeLlmChat, generaliseLlmError } from '../../src/engine/nodes/llm-chat.ts';
import { APICallError } from 'ai';
import type { NodeExecutionContext, NodeOutcome } from '../../src/engine/nodes/types.ts';
import { startProviderStub, STUB_INPUT_TOKENS, STUB_OUTPUT_TOKENS, type ProviderStub } from '../helpers/provider-stub.ts';

// The SDK warns about unknown model ids on stderr; the stub's model ids are made up.
(globalThis as { AI_SDK_LOG_WARNINGS?: boolean }).AI_SDK_LOG_WARNINGS = false;

const KEY = 'sk-test-Zq8v3NfK2pLw';

function emptyProviders(): ProviderEnv {
  return { openai: {}, anthropic: {}, google: {}, azure_openai: {}, vertex: {}, openrouter: {} };
}

function providersFor(stub: ProviderStub, provider: Provider, apiKey = KEY): ProviderEnv {
  const env = emptyProviders();
  env[provider] = { apiKey, baseURL: stub.baseURLFor(provider) };
  return env;
}

interface CtxOptions {
  provider: Provider;
  providers: ProviderEnv;
  credentialMode?: 'service_hosted' | 'byok';
  byokKey?: string;
  onDelta?: (text: string) => void | Promise<void>;
  signal?: AbortSignal;
  system?: string;
}

function context(o: CtxOptions): NodeExecutionContext & { deltas: string[] } {
  const deltas: string[] = [];
  const node: LlmNode = {
    id: 'summary',
    kind: 'llm.chat',
    provider: o.provider,
    model: 'stub-model-1',
    prompt: 'Summarise {{article}} in one line',
    ...(o.system !== undefined ? { system: o.system } : { system: 'You write for {{audience}}.' }),
  };
  const values: Record<string, string> = { article: 'the quarterly report', audience: 'accountants' };
  return {
    deltas,
    runId: 'run-1',
    node,
    render: (t) => t.replace(/\{\{(\w+)\}\}/g, (_, k: string) => values[k] ?? ''),
    credentialMode: o.credentialMode ?? 'service_hosted',
    byokKey: o.byokKey,
    providers: o.providers,
    allowPrivateNetwork: false,
    onDelta: o.onDelta ?? ((t) => void deltas.push(t)),
    signal: o.signal ?? new AbortController().signal,
  };
}

/** Where each provider's SDK puts the key. */
function keyHeader(provider: Provider, headers: Record<string, unknown>): unknown {
  switch (provider) {
    case 'openai':
    case 'openrouter':
      return headers.authorization;
    case 'anthropic':
      return headers['x-api-key'];
    case 'google':
    case 'vertex':
      return headers['x-goog-api-key'];
    case 'azure_openai':
      return headers['api-key'];
  }
}
function expectedKeyHeader(provider: Provider, key: string): string {
  return provider === 'openai' || provider === 'openrouter' ? `Bearer ${key}` : key;
}

const EXPECTED_PATH: Record<Provider, RegExp> = {
  openai: /^\/openai\/v1\/responses$/,
  anthropic: /^\/anthropic\/v1\/messages$/,
  google: /^\/google\/v1beta\/models\/stub-model-1:streamGenerateContent\?alt=sse$/,
  azure_openai: /^\/azure\/openai\/v1\/responses$/,
  vertex: /^\/vertex\/v1\/publishers\/google\/models\/stub-model-1:streamGenerateContent\?alt=sse$/,
  openrouter: /^\/openrouter\/api\/v1\/chat\/completions$/,
};

function assertFailed(out: NodeOutcome): string {
  if (out.status !== 'failed') assert.unreachable(`expected failed, got ${JSON.stringify(out)}`);
  return (out as { reason: string }).reason;
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    const v = await p;
    assert.unreachable(`expected a rejection, got ${JSON.stringify(v)}`);
  } catch (e) {
    if (e instanceof assert.Assertion) throw e;
    return e;
  }
}

for (const provider of PROVIDERS) {
  test(`the real ${provider} SDK streams the stub's deltas in order and reports the value and usage`, async () => {
    const chunks = ['The ', 'report ', 'shows ', 'growth', '.'];
    const stub = await startProviderStub({ chunks });
    try {
      const ctx = context({ provider, providers: providersFor(stub, provider) });
      const out = await executeLlmChat(ctx);
      assert.equal(ctx.deltas, chunks);
      assert.equal(out, {
        status: 'completed',
        value: 'The report shows growth.',
        usage: { provider, model: 'stub-model-1', inputTokens: STUB_INPUT_TOKENS, outputTokens: STUB_OUTPUT_TOKENS },
      });
      assert.is(ctx.deltas.join(''), (out as { value: string }).value);
    } finally {
      await stub.close();
    }
  });

  test(`the ${provider} request carries the key in the provider's auth header and the rendered prompt and system`, async () => {
    const stub = await startProviderStub();
    try {
      await executeLlmChat(context({ provider, providers: providersFor(stub, provider) }));
      assert.is(stub.requests.length, 1);
      const req = stub.requests[0]!;
      assert.match(req.path, EXPECTED_PATH[provider]);
      assert.is(keyHeader(provider, req.headers), expectedKeyHeader(provider, KEY));
      const body = JSON.stringify(req.body);
      assert.ok(body.includes('Summarise the quarterly report in one line'), body);
      assert.ok(body.includes('You write for accountants.'), body);
      assert.not.ok(body.includes('{{'), 'templates are rendered before sending');
    } finally {
      await stub.close();
    }
  });

  test(`a 401 from ${provider} fails with a generalised credentials reason that never contains the key`, async () => {
    const stub = await startProviderStub({ failWith: 401 });
    try {
      const out = await executeLlmChat(context({ provider, providers: providersFor(stub, provider) }));
      const reason = assertFailed(out);
      assert.is(reason, 'the model provider rejected the credentials');
      assert.not.ok(reason.includes(KEY));
      assert.not.ok(JSON.stringify(out).includes(KEY));
    } finally {
      await stub.close();
    }
  });

  test(`a 500 from ${provider} fails as "provider unavailable" without the provider's body`, async () => {
    const stub = await startProviderStub({ failWith: 500 });
    try {
      const out = await executeLlmChat(context({ provider, providers: providersFor(stub, provider) }));
      const reason = assertFailed(out);
      assert.is(reason, 'the model provider is unavailable');
      assert.not.ok(JSON.stringify(out).includes(KEY));
      assert.not.ok(JSON.stringify(out).includes('deadbeef'));
    } finally {
      await stub.close();
    }
  });

  test(`an error event in the middle of a ${provider} stream fails the node after the deltas already sent`, async () => {
    const stub = await startProviderStub({ chunks: ['one ', 'two ', 'three'], errorAfterChunks: 2 });
    try {
      const ctx = context({ provider, providers: providersFor(stub, provider) });
      const out = await executeLlmChat(ctx);
      assert.is(assertFailed(out), 'the model provider is unavailable');
      assert.equal(ctx.deltas, ['one ', 'two ']);
      assert.not.ok(JSON.stringify(out).includes('deadbeef'));
    } finally {
      await stub.close();
    }
  });

  test(`cancelling a ${provider} call mid-stream rejects with an AbortError after the deltas seen so far`, async () => {
    const stub = await startProviderStub({ chunks: ['one ', 'two ', 'three ', 'four'], delayMsBetweenChunks: 40 });
    try {
      const ac = new AbortController();
      const deltas: string[] = [];
      const ctx = context({
        provider,
        providers: providersFor(stub, provider),
        signal: ac.signal,
        onDelta: (t) => {
          deltas.push(t);
          if (deltas.length === 1) ac.abort();
        },
      });
      const err = (await rejection(executeLlmChat(ctx))) as Error;
      assert.is(err.name, 'AbortError');
      assert.equal(deltas, ['one ']);
    } finally {
      await stub.close();
    }
  });
}

test('a 429 is reported as rate limiting and a 400 as a rejected request', async () => {
  for (const [status, reason] of [
    [429, 'the model provider is rate limiting requests'],
    [400, 'the model provider rejected the request'],
  ] as const) {
    const stub = await startProviderStub({ failWith: status });
    try {
      const out = await executeLlmChat(context({ provider: 'openai', providers: providersFor(stub, 'openai') }));
      assert.is(assertFailed(out), reason);
    } finally {
      await stub.close();
    }
  }
});

test('a provider that cannot be reached is reported as unavailable', async () => {
  const stub = await startProviderStub();
  const providers = providersFor(stub, 'anthropic');
  await stub.close();
  const out = await executeLlmChat(context({ provider: 'anthropic', providers }));
  assert.is(assertFailed(out), 'the model provider is unavailable');
});

test('byok uses the caller key and not the service key', async () => {
  const stub = await startProviderStub();
  try {
    const providers = providersFor(stub, 'openai', 'sk-service-key');
    const out = await executeLlmChat(context({ provider: 'openai', providers, credentialMode: 'byok', byokKey: 'sk-caller-key' }));
    assert.is(out.status, 'completed');
    assert.is(stub.requests[0]!.headers.authorization, 'Bearer sk-caller-key');
  } finally {
    await stub.close();
  }
});

test('byok without a key asks for credentials and makes no provider call', async () => {
  const stub = await startProviderStub();
  try {
    for (const byokKey of [undefined, '', '   ']) {
      const out = await executeLlmChat(context({ provider: 'anthropic', providers: providersFor(stub, 'anthropic'), credentialMode: 'byok', byokKey }));
      assert.equal(out, { status: 'needs_credentials', provider: 'anthropic' });
    }
    assert.is(stub.requests.length, 0);
  } finally {
    await stub.close();
  }
});

test('service-hosted without a configured key fails with a buyer-safe reason and makes no provider call', async () => {
  const stub = await startProviderStub();
  try {
    const providers = emptyProviders();
    providers.google = { baseURL: stub.baseURLFor('google') };
    const out = await executeLlmChat(context({ provider: 'google', providers }));
    assert.equal(out, { status: 'failed', reason: 'the service has no credentials configured for google' });
    assert.is(stub.requests.length, 0);
  } finally {
    await stub.close();
  }
});

test('azure without a resource name or base URL fails before calling anything', async () => {
  const providers = emptyProviders();
  providers.azure_openai = { apiKey: KEY };
  const out = await executeLlmChat(context({ provider: 'azure_openai', providers }));
  assert.equal(out, { status: 'failed', reason: 'the service has no endpoint configured for azure_openai' });
});

test('each delta is awaited before the next one is delivered and before the node completes', async () => {
  const stub = await startProviderStub({ chunks: ['a', 'b', 'c'] });
  try {
    const log: string[] = [];
    let inFlight = 0;
    const ctx = context({
      provider: 'openai',
      providers: providersFor(stub, 'openai'),
      onDelta: async (t) => {
        inFlight++;
        assert.is(inFlight, 1, 'onDelta is never called again before the previous call resolved');
        log.push(`start ${t}`);
        await new Promise((r) => setTimeout(r, 15));
        log.push(`end ${t}`);
        inFlight--;
      },
    });
    const out = await executeLlmChat(ctx);
    assert.is(out.status, 'completed');
    assert.equal(log, ['start a', 'end a', 'start b', 'end b', 'start c', 'end c']);
  } finally {
    await stub.close();
  }
});

test('an error thrown by the delta sink propagates instead of becoming a model failure', async () => {
  const stub = await startProviderStub();
  try {
    const boom = new Error('event store down');
    const ctx = context({
      provider: 'openrouter',
      providers: providersFor(stub, 'openrouter'),
      onDelta: () => {
        throw boom;
      },
    });
    const err = await rejection(executeLlmChat(ctx));
    assert.is(err, boom);
  } finally {
    await stub.close();
  }
});

test('a signal aborted before the call rejects with an AbortError and makes no provider call', async () => {
  const stub = await startProviderStub();
  try {
    const ac = new AbortController();
    ac.abort();
    const err = (await rejection(executeLlmChat(context({ provider: 'openai', providers: providersFor(stub, 'openai'), signal: ac.signal })))) as Error;
    assert.is(err.name, 'AbortError');
    assert.is(stub.requests.length, 0);
  } finally {
    await stub.close();
  }
});

test('a node without a system prompt sends only the user prompt', async () => {
  const stub = await startProviderStub();
  try {
    const ctx = context({ provider: 'anthropic', providers: providersFor(stub, 'anthropic'), system: undefined });
    delete (ctx.node as LlmNode).system;
    const out = await executeLlmChat(ctx);
    assert.is(out.status, 'completed');
    assert.is(stub.requests[0]!.body.system, undefined);
  } finally {
    await stub.close();
  }
});

test('error generalisation looks only at status and class, never at messages', () => {
  const call = (statusCode: number | undefined) =>
    new APICallError({ message: `bad key ${KEY}`, url: 'https://x.invalid', requestBodyValues: {}, statusCode, responseBody: `{"key":"${KEY}"}` });
  assert.is(generaliseLlmError(call(403)), 'the model provider rejected the credentials');
  assert.is(generaliseLlmError(call(404)), 'the model provider rejected the request');
  assert.is(generaliseLlmError(call(503)), 'the model provider is unavailable');
  assert.is(generaliseLlmError(call(undefined)), 'the model provider is unavailable');
  assert.is(generaliseLlmError({ lastError: call(429), name: 'AI_RetryError' }), 'the model provider is rate limiting requests');
  assert.is(generaliseLlmError(new Error(`something with ${KEY}`)), 'the model call failed');
  assert.is(generaliseLlmError(new Error('wrapped', { cause: call(401) })), 'the model provider rejected the credentials');
});

test.run();
