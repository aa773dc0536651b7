import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Provider } from '../../src/domain/graph/types.ts';

/**
 * A local HTTP server that speaks the streaming wire formats of the model providers well enough for
 * the real AI SDK providers to run against it (no network, no mocks inside the SDK):
 *
 * | provider       | base URL handed to the SDK            | endpoint the SDK calls                                  | format |
 * |----------------|---------------------------------------|---------------------------------------------------------|--------|
 * | openai         | `<url>/openai/v1`                     | `POST …/responses` (Responses API; `…/chat/completions` too) | SSE |
 * | anthropic      | `<url>/anthropic/v1`                  | `POST …/messages`                                        | SSE |
 * | google         | `<url>/google/v1beta`                 | `POST …/models/<m>:streamGenerateContent?alt=sse`        | SSE |
 * | azure_openai   | `<url>/azure/openai/v1`               | `POST …/responses` (OpenAI format)                       | SSE |
 * | vertex         | `<url>/vertex/v1/publishers/google`   | `POST …/models/<m>:streamGenerateContent?alt=sse`        | SSE |
 * | openrouter     | `<url>/openrouter/api/v1`             | `POST …/chat/completions` (OpenAI chat format)           | SSE |
 *
 * `errorAfterChunks` sends the provider's own in-stream error event (an overloaded upstream) after that
 * many text chunks, the way providers fail a response that has already started.
 *
 * Every stream reports usage of 11 input and 7 output tokens. `failWith` answers every request with that
 * status and a provider-style error body that echoes the key (as OpenAI's 401 does), so tests can check
 * that the key never leaks into a failure reason.
 */

export const STUB_INPUT_TOKENS = 11;
export const STUB_OUTPUT_TOKENS = 7;

export interface StubRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: any;
}

export interface ProviderStubOptions {
  chunks?: string[];
  failWith?: number;
  delayMsBetweenChunks?: number;
  /** After this many text chunks, send the provider's in-stream error event (overloaded) and end. */
  errorAfterChunks?: number;
}

export interface ProviderStub {
  url: string;
  baseURLFor(provider: Provider): string;
  requests: StubRequest[];
  close(): Promise<void>;
}

const BASE_PATHS: Record<Provider, string> = {
  openai: '/openai/v1',
  anthropic: '/anthropic/v1',
  google: '/google/v1beta',
  azure_openai: '/azure/openai/v1',
  vertex: '/vertex/v1/publishers/google',
  openrouter: '/openrouter/api/v1',
};

type Format = 'responses' | 'chat' | 'anthropic' | 'google';

function formatOf(path: string): Format | null {
  const p = path.split('?')[0]!;
  if (p.endsWith('/responses')) return 'responses';
  if (p.endsWith('/chat/completions')) return 'chat';
  if (p.endsWith('/messages')) return 'anthropic';
  if (p.endsWith(':streamGenerateContent')) return 'google';
  return null;
}

function presentedKey(headers: http.IncomingHttpHeaders): string {
  const auth = headers.authorization;
  if (typeof auth === 'string' && auth.startsWith('Bearer ')) return auth.slice(7);
  return String(headers['x-api-key'] ?? headers['api-key'] ?? headers['x-goog-api-key'] ?? '');
}

function errorBody(format: Format, status: number, key: string): unknown {
  const message =
    status === 401
      ? `Incorrect API key provided: ${key}. You can find your API key at https://example.invalid/keys.`
      : `Internal failure while serving request for key ${key} (trace 0xdeadbeef)`;
  switch (format) {
    case 'anthropic':
      return { type: 'error', error: { type: status === 401 ? 'authentication_error' : 'api_error', message } };
    case 'google':
      return { error: { code: status, message, status: status === 401 ? 'UNAUTHENTICATED' : 'INTERNAL' } };
    default:
      return {
        error: { message, type: status === 401 ? 'invalid_request_error' : 'server_error', param: null, code: status === 401 ? 'invalid_api_key' : null },
      };
  }
}

/** The SSE frames for one streamed answer, as `[event name | null, JSON payload]` pairs. */
function frames(format: Format, model: string, chunks: string[]): Array<[string | null, unknown]> {
  const created = 1_700_000_000;
  const full = chunks.join('');
  switch (format) {
    case 'responses': {
      const base = { id: 'resp_stub', object: 'response', created_at: created, model, output: [], usage: null };
      const item = { id: 'msg_stub', type: 'message', role: 'assistant' };
      const out: Array<[string | null, unknown]> = [
        ['response.created', { type: 'response.created', sequence_number: 0, response: { ...base, status: 'in_progress' } }],
        ['response.in_progress', { type: 'response.in_progress', sequence_number: 1, response: { ...base, status: 'in_progress' } }],
        [
          'response.output_item.added',
          { type: 'response.output_item.added', sequence_number: 2, output_index: 0, item: { ...item, status: 'in_progress', content: [] } },
        ],
        [
          'response.content_part.added',
          {
            type: 'response.content_part.added',
            sequence_number: 3,
            item_id: 'msg_stub',
            output_index: 0,
            content_index: 0,
            part: { type: 'output_text', text: '', annotations: [] },
          },
        ],
      ];
      let seq = 4;
      for (const c of chunks) {
        out.push([
          'response.output_text.delta',
          { type: 'response.output_text.delta', sequence_number: seq++, item_id: 'msg_stub', output_index: 0, content_index: 0, delta: c, logprobs: [] },
        ]);
      }
      const content = [{ type: 'output_text', text: full, annotations: [] }];
      out.push(
        [
          'response.output_text.done',
          { type: 'response.output_text.done', sequence_number: seq++, item_id: 'msg_stub', output_index: 0, content_index: 0, text: full, logprobs: [] },
        ],
        [
          'response.content_part.done',
          { type: 'response.content_part.done', sequence_number: seq++, item_id: 'msg_stub', output_index: 0, content_index: 0, part: content[0] },
        ],
        [
          'response.output_item.done',
          { type: 'response.output_item.done', sequence_number: seq++, output_index: 0, item: { ...item, status: 'completed', content } },
        ],
        [
          'response.completed',
          {
            type: 'response.completed',
            sequence_number: seq++,
            response: {
              ...base,
              status: 'completed',
              output: [{ ...item, status: 'completed', content }],
              usage: {
                input_tokens: STUB_INPUT_TOKENS,
                input_tokens_details: { cached_tokens: 0 },
                output_tokens: STUB_OUTPUT_TOKENS,
                output_tokens_details: { reasoning_tokens: 0 },
                total_tokens: STUB_INPUT_TOKENS + STUB_OUTPUT_TOKENS,
              },
            },
          },
        ],
      );
      return out;
    }
    case 'chat': {
      const head = { id: 'chatcmpl-stub', object: 'chat.completion.chunk', created, model };
      const out: Array<[string | null, unknown]> = chunks.map((c, i) => [
        null,
        { ...head, choices: [{ index: 0, delta: i === 0 ? { role: 'assistant', content: c } : { content: c }, finish_reason: null }] },
      ]);
      out.push([null, { ...head, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }]);
      out.push([
        null,
        {
          ...head,
          choices: [],
          usage: { prompt_tokens: STUB_INPUT_TOKENS, completion_tokens: STUB_OUTPUT_TOKENS, total_tokens: STUB_INPUT_TOKENS + STUB_OUTPUT_TOKENS },
        },
      ]);
      return out;
    }
    case 'anthropic': {
      const out: Array<[string | null, unknown]> = [
        [
          'message_start',
          {
            type: 'message_start',
            message: {
              id: 'msg_stub',
              type: 'message',
              role: 'assistant',
              model,
              content: [],
              stop_reason: null,
              stop_sequence: null,
              usage: { input_tokens: STUB_INPUT_TOKENS, output_tokens: 1 },
            },
          },
        ],
        ['content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }],
        ['ping', { type: 'ping' }],
      ];
      for (const c of chunks) out.push(['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: c } }]);
      out.push(
        ['content_block_stop', { type: 'content_block_stop', index: 0 }],
        ['message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: STUB_OUTPUT_TOKENS } }],
        ['message_stop', { type: 'message_stop' }],
      );
      return out;
    }
    case 'google': {
      return chunks.map((c, i) => {
        const last = i === chunks.length - 1;
        return [
          null,
          {
            candidates: [{ content: { parts: [{ text: c }], role: 'model' }, index: 0, ...(last ? { finishReason: 'STOP' } : {}) }],
            usageMetadata: last
              ? { promptTokenCount: STUB_INPUT_TOKENS, candidatesTokenCount: STUB_OUTPUT_TOKENS, totalTokenCount: STUB_INPUT_TOKENS + STUB_OUTPUT_TOKENS }
              : { promptTokenCount: STUB_INPUT_TOKENS, totalTokenCount: STUB_INPUT_TOKENS },
            modelVersion: model,
          },
        ] as [null, unknown];
      });
    }
  }
}

/** The provider's in-stream error event for an overloaded upstream, `[event name | null, payload]`. */
function streamError(format: Format): [string | null, unknown] {
  const message = 'upstream overloaded, please retry (trace 0xdeadbeef)';
  switch (format) {
    case 'responses':
      return ['error', { type: 'error', sequence_number: 99, code: 'server_error', message, param: null }];
    case 'chat':
      return [null, { error: { message, code: 503, type: 'server_error' } }];
    case 'anthropic':
      return ['error', { type: 'error', error: { type: 'overloaded_error', message } }];
    case 'google':
      return [null, { error: { code: 503, message, status: 'UNAVAILABLE' } }];
  }
}

/** Whether a frame carries one text chunk (to count chunks for `errorAfterChunks`). */
function isTextFrame(format: Format, event: string | null, data: any): boolean {
  switch (format) {
    case 'responses':
      return event === 'response.output_text.delta';
    case 'anthropic':
      return event === 'content_block_delta';
    case 'chat':
      return typeof data?.choices?.[0]?.delta?.content === 'string';
    case 'google':
      return true;
  }
}

function modelOf(format: Format, path: string, body: any): string {
  if (format === 'google') return /\/models\/([^/:]+):/.exec(path)?.[1] ?? 'unknown';
  return typeof body?.model === 'string' ? body.model : 'unknown';
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function startProviderStub(opts: ProviderStubOptions = {}): Promise<ProviderStub> {
  const chunks = opts.chunks ?? ['Hello', ', ', 'world', '!'];
  const requests: StubRequest[] = [];

  const server = http.createServer(async (req, res) => {
    const raw: Buffer[] = [];
    for await (const part of req) raw.push(part as Buffer);
    const text = Buffer.concat(raw).toString('utf8');
    let body: any = text;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      // keep the raw text
    }
    const path = req.url ?? '/';
    requests.push({ method: req.method ?? 'GET', path, headers: req.headers, body });

    const format = formatOf(path);
    if (req.method !== 'POST' || format === null) {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: `no stub for ${req.method} ${path}` } }));
      return;
    }
    if (opts.failWith) {
      res.writeHead(opts.failWith, { 'content-type': 'application/json' }).end(JSON.stringify(errorBody(format, opts.failWith, presentedKey(req.headers))));
      return;
    }

    let gone = false;
    res.on('close', () => {
      gone = true;
    });
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    const model = modelOf(format, path, body);
    const all = frames(format, model, chunks);
    const send = ([event, data]: [string | null, unknown]) => res.write(`${event ? `event: ${event}\n` : ''}data: ${JSON.stringify(data)}\n\n`);
    let textFrames = 0;
    for (const frame of all) {
      if (gone) return;
      if (opts.errorAfterChunks !== undefined && isTextFrame(format, frame[0], frame[1]) && textFrames++ === opts.errorAfterChunks) {
        send(streamError(format));
        res.end();
        return;
      }
      send(frame);
      if (opts.delayMsBetweenChunks) await sleep(opts.delayMsBetweenChunks);
    }
    if (gone) return;
    if (format === 'chat') res.write('data: [DONE]\n\n');
    res.end();
  });

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    baseURLFor: (provider) => `${url}${BASE_PATHS[provider]}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
