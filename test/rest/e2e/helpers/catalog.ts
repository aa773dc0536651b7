/**
 * What the e2e suite adds to the REST fixture catalog (test/fixtures/rest-catalog.yaml, which has the
 * bundle, wallet and typed-input workflows): delays, LLM steps, a compute limit, a failing node, and an
 * account with a concurrency limit. All owned by alice; prices in the fixture's `stepUsd` of 0.0001.
 */

/** Bundle-funded for bob (v1 pinned, 0.20 a run); wallet-priced 0.25 + steps for others. */
export const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';
/** `free`, with an `http.request` to the `site` input (a slow step when the site never answers). */
export const W_TYPED = 'aaaaaaaa-0000-4000-8000-000000000002';
/** a → 1 s delay → b → output; 0.25 + two steps. */
export const W_DELAY = 'eeeeeeee-0000-4000-8000-000000000001';
/** The same with a 3 s delay: a run that holds its capacity slot for a while. */
export const W_LONG_DELAY = 'eeeeeeee-0000-4000-8000-000000000002';
/** BYOK LLM step (openai): without a key the run waits for credentials. */
export const W_BYOK = 'eeeeeeee-0000-4000-8000-000000000003';
/** Service-hosted LLM step (openai), the provider at OPENAI_BASE_URL. */
export const W_LLM = 'eeeeeeee-0000-4000-8000-000000000004';
/** Four template steps under a compute limit of 0.00025: the third step would cross it. */
export const W_LIMIT = 'eeeeeeee-0000-4000-8000-000000000005';
/** A json.parse of text that is not JSON next to a branch that works. */
export const W_ISSUES = 'eeeeeeee-0000-4000-8000-000000000006';
/** template → 1 s delay → LLM (service-hosted): many events spread over time, for live streams. */
export const W_STORY = 'eeeeeeee-0000-4000-8000-000000000007';

const price = { runModel: 'per_run', priceUsd: '0.250000', listing: 'public' };
const delayNodes = (seconds: number) => [
  { id: 'a', kind: 'text.template', template: 'before' },
  { id: 'wait', kind: 'delay', seconds, after: ['a'] },
  { id: 'b', kind: 'text.template', template: '{{a}} and after', after: ['wait'] },
  { id: 'out', kind: 'output', from: 'b', name: 'Result' },
];
const llm = { id: 'llm', kind: 'llm.chat', provider: 'openai', model: 'gpt-4o-mini', prompt: 'Tell me about {{intro}}' };

export const E2E_ACCOUNTS = [
  {
    handle: 'dave',
    id: '66666666-6666-4666-8666-666666666666',
    walletUsd: '10.000000',
    maxConcurrentRuns: 1,
    apiKeys: [{ secret: 'wr_test_dave', scopes: ['run:execute', 'run:read'] }],
  },
];

/** A per-run workflow (0.25) owned by alice with one version. */
const wf = (id: string, name: string, nodes: unknown[], extra: Record<string, unknown> = {}) => ({
  id,
  owner: 'alice',
  name,
  ...price,
  ...extra,
  versions: [{ label: 'v1', graph: { nodes } }],
});
const text = (id: string, template: string, extra: Record<string, unknown> = {}) => ({ id, kind: 'text.template', template, ...extra });

export const E2E_WORKFLOWS = [
  wf(W_DELAY, 'Wait a second', delayNodes(1)),
  wf(W_LONG_DELAY, 'Wait three seconds', delayNodes(3)),
  wf(W_BYOK, 'Bring your own key', [text('intro', 'owls'), llm, { id: 'out', kind: 'output', from: 'llm', name: 'Answer' }], { credentialMode: 'byok' }),
  wf(W_LLM, 'Ask a model', [text('intro', 'owls'), llm, { id: 'out', kind: 'output', from: 'llm', name: 'Answer' }]),
  wf(
    W_LIMIT,
    'Too much compute',
    [
      text('s1', 'one'),
      text('s2', '{{s1}} two'),
      text('s3', '{{s2}} three'),
      text('s4', '{{s3}} four'),
      { id: 'out', kind: 'output', from: 's4', name: 'Count' },
    ],
    { computeLimitUsd: '0.000250' },
  ),
  wf(W_ISSUES, 'Half broken', [
    text('raw', 'not json'),
    { id: 'parsed', kind: 'json.parse', from: 'raw' },
    text('other', 'fine'),
    { id: 'out_parsed', kind: 'output', from: 'parsed', name: 'Parsed' },
    { id: 'out_other', kind: 'output', from: 'other', name: 'Other' },
  ]),
  wf(W_STORY, 'A story in parts', [
    text('intro', 'owls'),
    { id: 'wait', kind: 'delay', seconds: 1, after: ['intro'] },
    { ...llm, after: ['wait'] },
    { id: 'out', kind: 'output', from: 'llm', name: 'Story' },
  ]),
];
