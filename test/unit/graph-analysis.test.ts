import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { analyseGraph, freezeGraph } from '../../src/domain/graph/analysis.ts';
import { plan, type PlanInput } from '../../src/domain/graph/interpreter.ts';
import type { Graph, GraphNode } from '../../src/domain/graph/types.ts';

/** src/domain/graph/analysis.ts: a shared (frozen) graph is analysed once, any other graph on every call. */

const graph = (): Graph => ({
  nodes: [
    { id: 'name', kind: 'input.text' },
    { id: 'greet', kind: 'text.template', template: 'Hello {{name}}', when: { node: 'check', is: true } },
    { id: 'check', kind: 'condition', value: '{{name}}', op: 'not_empty' },
    { id: 'call', kind: 'http.request', url: 'https://example.com/{{greet}}', headers: { 'x-who': '{{name}}' } },
    { id: 'greet', kind: 'text.template', template: 'a repeated id: {{call}}' },
    { id: 'out', kind: 'output', from: 'call.body.0', after: ['greet'] },
  ],
});

const state = (g: Graph): PlanInput => ({ graph: g, inputs: { name: 'Ada' }, results: {}, timers: {}, running: [], now: 0 });

test('a frozen graph is analysed once: every call gives back the same analysis', () => {
  const g = freezeGraph(graph());
  const first = analyseGraph(g);
  assert.is(analyseGraph(g), first);
  assert.equal(
    first.nodes.map((n) => n.id),
    ['name', 'greet', 'check', 'call', 'out'],
    'the first of a repeated id',
  );
  assert.equal(first.deps, [[], ['check', 'name'], ['name'], ['greet', 'name'], ['greet', 'call']]);
  assert.equal([...first.kindOf.keys()], ['name', 'greet', 'check', 'call', 'out']);
});

test('a graph that can change is analysed afresh on every call, and so is one frozen only at its root', () => {
  const g = graph();
  const before = analyseGraph(g);
  assert.is.not(analyseGraph(g), before);
  (g.nodes[1] as { template: string }).template = 'now {{call}}';
  assert.equal(analyseGraph(g).deps[1], ['check', 'call'], 'an edited graph is planned as it is now');
  const shallow = Object.freeze(graph());
  assert.is.not(analyseGraph(shallow), analyseGraph(shallow));
});

test('a frozen graph plans exactly as the same graph unfrozen, again and again', () => {
  const frozen = freezeGraph(graph());
  const plain = graph();
  for (let i = 0; i < 3; i++) assert.equal(plan(state(frozen)), plan(state(plain)));
  assert.equal(
    plan(state(frozen)).actions.map((a) => `${a.type}:${a.nodeId}`),
    ['resolve:name', 'resolve:check', 'execute:greet'],
  );
});

test('freezeGraph freezes every node and everything in it, so an edit throws instead of reaching every run', () => {
  const g = freezeGraph(graph());
  assert.ok(Object.isFrozen(g) && Object.isFrozen(g.nodes));
  for (const n of g.nodes) assert.ok(Object.isFrozen(n), n.id);
  const call = g.nodes[3] as Extract<GraphNode, { kind: 'http.request' }>;
  assert.ok(Object.isFrozen(call.headers) && Object.isFrozen(g.nodes[1]!.when) && Object.isFrozen(g.nodes[5]!.after));
  assert.throws(() => ((g.nodes[1] as { template: string }).template = 'edited'), TypeError);
  assert.throws(() => g.nodes.push({ id: 'more', kind: 'input.text' }), TypeError);
  assert.throws(() => (call.headers!['x-who'] = 'edited'), TypeError);
  assert.is(freezeGraph(g), g, 'freezing it again changes nothing');
});

test.run();
