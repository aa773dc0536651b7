import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { Graph } from '../../src/domain/graph/types.ts';
import { canonicalJson } from '../../src/domain/canonical-json.ts';
import { computeRequiredProviders, countStepNodes, inputSchema, validateGraph } from '../../src/domain/graph/validate.ts';

const P = 'workflows[2].versions[0].graph';

/** A graph using every node kind, valid as a whole. */
const everyKind = (): Graph =>
  ({
    nodes: [
      { id: 'name', kind: 'input.text', name: 'Name', required: true, placeholder: 'Ada', description: 'who' },
      { id: 'secret', kind: 'input.password' },
      { id: 'count', kind: 'input.number', defaultValue: '3' },
      { id: 'notes', kind: 'input.textarea' },
      { id: 'site', kind: 'input.url', defaultValue: 'https://example.com' },
      { id: 'doc', kind: 'input.file' },
      { id: 'meta', kind: 'input.json', defaultValue: '{"a":1}' },
      {
        id: 'tone',
        kind: 'input.dropdown',
        defaultValue: 'warm',
        options: [
          { label: 'Warm', value: 'warm' },
          { label: 'Cold', value: 'cold' },
        ],
      },
      { id: 'is_warm', kind: 'condition', value: '{{tone}}', op: 'equals', operand: 'warm' },
      { id: 'hello', kind: 'text.template', template: 'Hi {{name}} x{{count}}', when: { node: 'is_warm', is: true } },
      { id: 'chat', kind: 'llm.chat', provider: 'openai', model: 'gpt-4o-mini', prompt: 'Say {{hello}} with key {{secret}}', system: 'be brief' },
      { id: 'claude', kind: 'llm.chat', provider: 'anthropic', model: 'claude', prompt: '{{notes}}' },
      { id: 'again', kind: 'llm.chat', provider: 'openai', model: 'gpt-4o', prompt: '{{doc}} {{meta.a}}' },
      { id: 'wait', kind: 'delay', seconds: 0, after: ['chat'] },
      { id: 'fetch', kind: 'http.request', method: 'post', url: '{{site}}', headers: { Authorization: 'Bearer {{secret}}' }, body: '{{chat}}' },
      { id: 'parsed', kind: 'json.parse', from: 'fetch', after: ['wait'] },
      {
        id: 'out',
        kind: 'output',
        from: 'parsed.items.0',
        name: 'first',
        type: 'json',
        integration: { provider: 'github', name: 'GitHub', makesChanges: false },
      },
    ],
  }) as Graph;

const one = (graph: unknown) => validateGraph(graph, P);
const withNode = (node: Record<string, unknown>, extra: Record<string, unknown>[] = []) => one({ nodes: [...extra, node] });

test('a graph using every node kind is valid', () => {
  assert.equal(one(everyKind()), []);
});

test('an unknown kind is reported with the full path and the bad value', () => {
  const g = everyKind() as unknown as { nodes: Record<string, unknown>[] };
  g.nodes[3] = { id: 'notes', kind: 'llm.chatt' };
  const errors = one(g);
  assert.ok(
    errors.some((e) => e.startsWith(`${P}.nodes[3].kind: unknown kind "llm.chatt"`)),
    errors.join('\n'),
  );
});

test('a graph that is not an object with a nodes array is rejected', () => {
  assert.equal(one(null), [`${P}: must be an object with a "nodes" array`]);
  assert.equal(one({}), [`${P}.nodes: is required`]);
  assert.equal(one({ nodes: {} }), [`${P}.nodes: must be an array of nodes`]);
  assert.equal(one({ nodes: [] }), [`${P}.nodes: must contain at least one node`]);
  assert.equal(one({ nodes: [{ id: 'a', kind: 'input.text' }], edges: [] }), [`${P}.edges: unknown field`]);
});

test('required fields of each kind must be present with the right types', () => {
  assert.equal(withNode({ id: 'x', kind: 'text.template' }), [`${P}.nodes[0].template: is required`]);
  assert.equal(withNode({ id: 'x', kind: 'llm.chat', model: 'm', prompt: 'p' }), [`${P}.nodes[0].provider: is required`]);
  assert.ok(withNode({ id: 'x', kind: 'llm.chat', provider: 'openai', prompt: 'p' }).includes(`${P}.nodes[0].model: is required`));
  assert.ok(withNode({ id: 'x', kind: 'condition', value: 'v', op: 'equals', operand: 1 }).length === 0);
  assert.equal(withNode({ id: 'x', kind: 'condition', op: 'is_empty' }), [`${P}.nodes[0].value: is required`]);
  assert.equal(withNode({ id: 'x', kind: 'json.parse' }), [`${P}.nodes[0].from: is required`]);
  assert.equal(withNode({ id: 'x', kind: 'output' }), [`${P}.nodes[0].from: is required`]);
  assert.equal(withNode({ id: 'x', kind: 'http.request' }), [`${P}.nodes[0].url: is required`]);
  assert.equal(withNode({ id: 'x', kind: 'text.template', template: 5 }), [`${P}.nodes[0].template: must be a string`]);
  assert.equal(withNode({ kind: 'delay', seconds: 1 }), [`${P}.nodes[0].id: is required`]);
});

test('providers and condition operators must be known values', () => {
  const bad = withNode({ id: 'x', kind: 'llm.chat', provider: 'openia', model: 'm', prompt: 'p' });
  assert.is(bad.length, 1);
  assert.match(bad[0]!, `${P}.nodes[0].provider: unknown provider "openia"; expected one of openai, anthropic`);
  const op = withNode({ id: 'x', kind: 'condition', value: 'v', op: 'equal', operand: 'a' });
  assert.match(op[0]!, `${P}.nodes[0].op: unknown op "equal"`);
  assert.equal(withNode({ id: 'x', kind: 'condition', value: 'v', op: 'gt' }), [`${P}.nodes[0].operand: is required for op gt`]);
  assert.equal(withNode({ id: 'x', kind: 'condition', value: 'v', op: 'lt', operand: 'many' }), [`${P}.nodes[0].operand: must be a number for op lt`]);
});

test('a dropdown needs options and only a dropdown may have them', () => {
  assert.equal(withNode({ id: 'd', kind: 'input.dropdown' }), [`${P}.nodes[0].options: is required for input.dropdown`]);
  assert.equal(withNode({ id: 'd', kind: 'input.dropdown', options: [] }), [`${P}.nodes[0].options: must be a non-empty array of { label, value }`]);
  assert.equal(withNode({ id: 'd', kind: 'input.dropdown', options: [{ label: 'A' }] }), [`${P}.nodes[0].options[0].value: is required`]);
  assert.equal(withNode({ id: 't', kind: 'input.text', options: [{ label: 'A', value: 'a' }] }), [`${P}.nodes[0].options: is only allowed on input.dropdown`]);
  assert.equal(withNode({ id: 'd', kind: 'input.dropdown', defaultValue: 'z', options: [{ label: 'A', value: 'a' }] }), [
    `${P}.nodes[0].defaultValue: "z" is not one of the option values`,
  ]);
  assert.equal(withNode({ id: 'n', kind: 'input.number', defaultValue: 'ten' }), [`${P}.nodes[0].defaultValue: must be a number`]);
  assert.equal(withNode({ id: 'n', kind: 'input.text', required: 'yes' }), [`${P}.nodes[0].required: must be a boolean`]);
});

test('delay seconds must be a non-negative number', () => {
  assert.equal(withNode({ id: 'w', kind: 'delay', seconds: -1 }), [`${P}.nodes[0].seconds: must be >= 0`]);
  assert.equal(withNode({ id: 'w', kind: 'delay', seconds: '5' }), [`${P}.nodes[0].seconds: must be a number`]);
  assert.equal(withNode({ id: 'w', kind: 'delay' }), [`${P}.nodes[0].seconds: is required`]);
  assert.equal(withNode({ id: 'w', kind: 'delay', seconds: 2.5 }), []);
});

test('http.request checks the method and that headers are a map of strings', () => {
  assert.equal(withNode({ id: 'h', kind: 'http.request', url: 'https://x', method: 7 }), [`${P}.nodes[0].method: must be a string`]);
  assert.match(withNode({ id: 'h', kind: 'http.request', url: 'https://x', method: 'FETCH' })[0]!, `${P}.nodes[0].method: unknown method "FETCH"`);
  assert.equal(withNode({ id: 'h', kind: 'http.request', url: 'https://x', headers: ['a'] }), [
    `${P}.nodes[0].headers: must be a map of header names to string values`,
  ]);
  assert.equal(withNode({ id: 'h', kind: 'http.request', url: 'https://x', headers: { 'X-N': 1 } }), [`${P}.nodes[0].headers.X-N: must be a string`]);
});

test('unknown fields on a node are rejected so typos do not pass silently', () => {
  assert.equal(withNode({ id: 'c', kind: 'llm.chat', provider: 'openai', model: 'm', prompt: 'p', promt: 'q' }), [
    `${P}.nodes[0].promt: unknown field for kind llm.chat`,
  ]);
});

test('duplicate ids and ids outside the allowed charset are rejected', () => {
  const errors = one({
    nodes: [
      { id: 'a', kind: 'input.text' },
      { id: 'a', kind: 'input.text' },
      { id: 'a.b', kind: 'input.text' },
    ],
  });
  assert.equal(errors, [`${P}.nodes[1].id: duplicate id "a" (also nodes[0])`, `${P}.nodes[2].id: "a.b" may contain only letters, digits, "_" and "-"`]);
});

test('references to unknown nodes are reported where they are made', () => {
  const errors = one({
    nodes: [
      { id: 'a', kind: 'text.template', template: 'x {{ghost.field}}', after: ['nobody'] },
      { id: 'b', kind: 'output', from: 'missing' },
      { id: 'c', kind: 'json.parse', from: 'a', when: { node: 'nope', is: true } },
      { id: 'd', kind: 'http.request', url: 'https://x', headers: { 'X-Key': '{{lost}}' } },
    ],
  });
  assert.equal(errors, [
    `${P}.nodes[0].after[0]: unknown node "nobody"`,
    `${P}.nodes[0].template: unknown node "ghost" in {{ghost.field}}`,
    `${P}.nodes[1].from: unknown node "missing"`,
    `${P}.nodes[2].when.node: unknown node "nope"`,
    `${P}.nodes[3].headers.X-Key: unknown node "lost" in {{lost}}`,
  ]);
});

test('when must name a condition node', () => {
  const errors = one({
    nodes: [
      { id: 'a', kind: 'input.text' },
      { id: 'b', kind: 'text.template', template: 'x', when: { node: 'a', is: true } },
    ],
  });
  assert.equal(errors, [`${P}.nodes[1].when.node: "a" is not a condition node`]);
  assert.equal(one({ nodes: [{ id: 'a', kind: 'input.text', when: { node: 'a' } }] })[0], `${P}.nodes[0].when.is: is required`);
});

test('cycles are rejected and the cycle is named', () => {
  const errors = one({
    nodes: [
      { id: 'a', kind: 'text.template', template: '{{c}}' },
      { id: 'b', kind: 'text.template', template: '{{a}}' },
      { id: 'c', kind: 'json.parse', from: 'b' },
      { id: 'self', kind: 'text.template', template: 'x', after: ['self'] },
    ],
  });
  assert.is(errors.length, 2, errors.join('\n'));
  assert.match(errors[0]!, `${P}.nodes: cycle `);
  for (const id of ['a', 'b', 'c']) assert.match(errors[0]!, id);
  assert.is(errors[1], `${P}.nodes: cycle self -> self`);
});

test('password inputs may feed http.request and llm.chat but nothing that echoes them', () => {
  const pw = { id: 'pw', kind: 'input.password' };
  const forbidden: [Record<string, unknown>, string][] = [
    [{ id: 'x', kind: 'text.template', template: 'token={{pw}}' }, 'template'],
    [{ id: 'x', kind: 'output', from: 'pw' }, 'from'],
    [{ id: 'x', kind: 'condition', value: '{{pw}}', op: 'not_empty' }, 'value'],
    [{ id: 'x', kind: 'json.parse', from: 'pw' }, 'from'],
  ];
  for (const [node, field] of forbidden) {
    const errors = withNode(node, [pw]);
    assert.is(errors.length, 1, `${node.kind}: ${errors.join('\n')}`);
    assert.match(errors[0]!, `${P}.nodes[1].${field}: password input "pw" cannot be used by ${node.kind as string}`);
  }
  assert.equal(withNode({ id: 'h', kind: 'http.request', url: 'https://x/{{pw}}', headers: { A: '{{pw}}' }, body: '{{pw}}' }, [pw]), []);
  assert.equal(withNode({ id: 'l', kind: 'llm.chat', provider: 'openai', model: 'm', prompt: 'use {{pw}}' }, [pw]), []);
  assert.equal(withNode({ id: 'later', kind: 'text.template', template: 'no value', after: ['pw'] }, [pw]), []);
});

test('required providers are distinct and in the published order', () => {
  assert.equal(computeRequiredProviders(everyKind()), ['openai', 'anthropic']);
  assert.equal(computeRequiredProviders({ nodes: [{ id: 'a', kind: 'input.text' }] }), []);
});

test('step nodes are counted by kind', () => {
  // hello, chat, claude, again, fetch, parsed
  assert.is(countStepNodes(everyKind()), 6);
});

test('the input schema lists input nodes with only the fields they set', () => {
  const schema = inputSchema(everyKind());
  assert.is(schema.length, 8);
  assert.equal(schema[0], { nodeId: 'name', name: 'Name', type: 'text', specId: 'input.text', description: 'who', required: true, placeholder: 'Ada' });
  assert.equal(schema[1], { nodeId: 'secret', name: 'secret', type: 'password', specId: 'input.password' });
  assert.equal(schema[7], {
    nodeId: 'tone',
    name: 'tone',
    type: 'dropdown',
    specId: 'input.dropdown',
    defaultValue: 'warm',
    options: [
      { label: 'Warm', value: 'warm' },
      { label: 'Cold', value: 'cold' },
    ],
  });
  assert.ok(schema.every((f) => f.type === 'dropdown' || !('options' in f)));
});

test('canonical JSON ignores key order but not array order', () => {
  assert.is(canonicalJson({ b: 1, a: { d: [2, 1], c: null } }), canonicalJson({ a: { c: null, d: [2, 1] }, b: 1 }));
  assert.is.not(canonicalJson({ a: [1, 2] }), canonicalJson({ a: [2, 1] }));
});

test.run();
