import { test } from 'uvu';
import * as assert from 'uvu/assert';
import fc from 'fast-check';
import { plan, type Action, type Plan, type PlanInput } from '../../src/domain/graph/interpreter.ts';
import { dependencies, renderTemplate } from '../../src/domain/graph/template.ts';
import {
  INPUT_KINDS,
  STEP_KINDS,
  type ConditionNode,
  type ConditionOp,
  type Graph,
  type GraphNode,
  type JsonValue,
  type NodeResult,
} from '../../src/domain/graph/types.ts';

// ---------------------------------------------------------------------------------------------------
// Helpers

const NOW = 1_000_000;

const g = (...nodes: GraphNode[]): Graph => ({ nodes });
const state = (graph: Graph, over: Partial<PlanInput> = {}): PlanInput => ({
  graph,
  inputs: {},
  results: {},
  timers: {},
  running: [],
  now: NOW,
  ...over,
});
const ok = (value: JsonValue): NodeResult => ({ status: 'completed', value });
const fail = (reason: string): NodeResult => ({ status: 'failed', reason });
const skipped = (reason: 'condition_false' | 'upstream_failed'): NodeResult => ({ status: 'skipped', reason });

const text = (id: string, template: string, extra: Partial<GraphNode> = {}): GraphNode => ({ id, kind: 'text.template', template, ...extra }) as GraphNode;
const input = (id: string, kind: (typeof INPUT_KINDS)[number] = 'input.text'): GraphNode => ({ id, kind });
const cond = (id: string, value: string, op: ConditionOp, operand?: JsonValue, extra: Partial<GraphNode> = {}): GraphNode =>
  ({ id, kind: 'condition', value, op, ...(operand !== undefined ? { operand } : {}), ...extra }) as GraphNode;
const out = (id: string, from: string, extra: Partial<GraphNode> = {}): GraphNode => ({ id, kind: 'output', from, ...extra }) as GraphNode;
const delay = (id: string, seconds: number, extra: Partial<GraphNode> = {}): GraphNode => ({ id, kind: 'delay', seconds, ...extra }) as GraphNode;

/** Applies a plan's actions to a state, the way an engine would (executes become running). */
function apply(s: PlanInput, actions: Action[]): PlanInput {
  const results = { ...s.results };
  const timers = { ...s.timers };
  const running = [...s.running];
  for (const a of actions) {
    if (a.type === 'resolve') results[a.nodeId] = ok(a.value);
    else if (a.type === 'skip') results[a.nodeId] = skipped(a.reason);
    else if (a.type === 'execute') running.push(a.nodeId);
    else if (a.type === 'start_timer') timers[a.nodeId] = a.dueAt;
    else {
      delete timers[a.nodeId];
      results[a.nodeId] = ok(null);
    }
  }
  return { ...s, results, timers, running };
}

/** Completes a running step with a result, as the activity would. */
function complete(s: PlanInput, nodeId: string, result: NodeResult): PlanInput {
  return { ...s, running: s.running.filter((id) => id !== nodeId), results: { ...s.results, [nodeId]: result } };
}

/**
 * Drives a run to its end: executes complete through `step` (default: render the template, or "ok"),
 * time jumps to the next timer when that is all the run waits for.
 */
function drive(initial: PlanInput, step: (node: GraphNode, s: PlanInput) => NodeResult = defaultStep): { state: PlanInput; plans: Plan[] } {
  let s = initial;
  const plans: Plan[] = [];
  for (let i = 0; i < 1000; i++) {
    const p = plan(s);
    plans.push(p);
    s = apply(s, p.actions);
    if (p.finished) return { state: s, plans };
    if (p.actions.length > 0) continue;
    if (p.waiting?.kind === 'running') {
      for (const id of [...s.running]) s = complete(s, id, step(s.graph.nodes.find((n) => n.id === id)!, s));
    } else if (p.waiting?.kind === 'timer') {
      s = { ...s, now: p.waiting.until };
    } else {
      throw new Error('stuck');
    }
  }
  throw new Error('did not finish');
}

function defaultStep(node: GraphNode, s: PlanInput): NodeResult {
  const lookup = (id: string) => {
    const r = s.results[id];
    return r?.status === 'completed' ? r.value : undefined;
  };
  return node.kind === 'text.template' ? ok(renderTemplate(node.template, lookup)) : ok('ok');
}

const types = (p: Plan) => p.actions.map((a) => `${a.type}:${a.nodeId}`);

// ---------------------------------------------------------------------------------------------------
// Input nodes

test('every input kind resolves to its value from inputs, in graph order', () => {
  const nodes = INPUT_KINDS.map((kind, i) => input(`in${i}`, kind));
  const inputs = Object.fromEntries(nodes.map((n, i) => [n.id, `v${i}`]));
  const p = plan(state(g(...nodes), { inputs }));
  assert.equal(
    p.actions,
    nodes.map((n, i) => ({ type: 'resolve', nodeId: n.id, value: `v${i}` })),
  );
});

test('an input with no value resolves to null', () => {
  const p = plan(state(g(input('a'), input('b', 'input.password')), { inputs: { b: null } }));
  assert.equal(p.actions, [
    { type: 'resolve', nodeId: 'a', value: null },
    { type: 'resolve', nodeId: 'b', value: null },
  ]);
});

test('input values keep their JSON type', () => {
  const p = plan(state(g(input('n', 'input.number'), input('j', 'input.json')), { inputs: { n: 42, j: { a: [1] } } }));
  assert.equal(p.actions, [
    { type: 'resolve', nodeId: 'n', value: 42 },
    { type: 'resolve', nodeId: 'j', value: { a: [1] } },
  ]);
});

test('an input already resolved is not resolved again', () => {
  const p = plan(state(g(input('a'), text('t', '{{a}}')), { inputs: { a: 'x' }, results: { a: ok('x') } }));
  assert.equal(types(p), ['execute:t']);
});

test('input names that collide with Object.prototype members are treated as plain ids', () => {
  const p = plan(state(g(input('constructor'), out('toString', 'constructor'))));
  assert.equal(p.actions, [
    { type: 'resolve', nodeId: 'constructor', value: null },
    { type: 'resolve', nodeId: 'toString', value: null },
  ]);
  assert.equal(p.finished?.outputs, [{ nodeId: 'toString', name: 'toString', type: 'json', value: null }]);
});

// ---------------------------------------------------------------------------------------------------
// Step nodes

test('every step kind is executed with its kind once its dependencies are satisfied', () => {
  const graph = g(
    input('a'),
    text('t', 'hi {{a}}'),
    { id: 'l', kind: 'llm.chat', provider: 'openai', model: 'm', prompt: '{{a}}' },
    { id: 'j', kind: 'json.parse', from: 'a' },
    { id: 'h', kind: 'http.request', url: 'https://x.test/{{a}}' },
  );
  const p = plan(state(graph, { inputs: { a: 'v' } }));
  assert.equal(p.actions, [
    { type: 'resolve', nodeId: 'a', value: 'v' },
    { type: 'execute', nodeId: 't', kind: 'text.template' },
    { type: 'execute', nodeId: 'l', kind: 'llm.chat' },
    { type: 'execute', nodeId: 'j', kind: 'json.parse' },
    { type: 'execute', nodeId: 'h', kind: 'http.request' },
  ]);
  assert.is(p.waiting, null);
  assert.is(p.finished, null);
  assert.equal(STEP_KINDS.length, 4);
});

test('a step waits until every dependency named by a template has a result', () => {
  const graph = g(text('a', 'a'), text('b', 'b'), text('c', '{{a}} {{b}}'));
  const p = plan(state(graph, { results: { a: ok('a') }, running: ['b'] }));
  assert.equal(p.actions, []);
  assert.equal(p.waiting, { kind: 'running' });
});

test('a step with an after dependency waits for it even without referencing it', () => {
  const graph = g(text('a', 'a'), text('b', 'b', { after: ['a'] }));
  assert.equal(types(plan(state(graph))), ['execute:a']);
  assert.equal(types(plan(state(graph, { results: { a: ok('a') } }))), ['execute:b']);
});

test('a running step is not executed again and the run waits for it', () => {
  const graph = g(text('a', 'x'));
  const p = plan(state(graph, { running: ['a'] }));
  assert.equal(p, { actions: [], waiting: { kind: 'running' }, finished: null });
});

test('a step that has a result is not executed again', () => {
  const p = plan(state(g(text('a', 'x'), out('o', 'a')), { results: { a: ok('x') } }));
  assert.equal(types(p), ['resolve:o']);
});

test('two independent branches are executed in the same plan', () => {
  const graph = g(input('q'), text('left', 'L {{q}}'), text('right', 'R {{q}}'), text('join', '{{left}}{{right}}'));
  const p = plan(state(graph, { inputs: { q: 'x' } }));
  assert.equal(types(p), ['resolve:q', 'execute:left', 'execute:right']);
});

test('a diamond joins only after both branches complete, then executes once', () => {
  const graph = g(text('top', 't'), text('l', '{{top}}'), text('r', '{{top}}'), text('join', '{{l}}+{{r}}'), out('o', 'join'));
  let s = state(graph);
  assert.equal(types(plan(s)), ['execute:top']);
  s = complete(apply(s, plan(s).actions), 'top', ok('t'));
  assert.equal(types(plan(s)), ['execute:l', 'execute:r']);
  s = apply(s, plan(s).actions);
  s = complete(s, 'l', ok('L'));
  assert.equal(plan(s), { actions: [], waiting: { kind: 'running' }, finished: null });
  s = complete(s, 'r', ok('R'));
  assert.equal(types(plan(s)), ['execute:join']);
  s = complete(apply(s, plan(s).actions), 'join', ok('L+R'));
  const last = plan(s);
  assert.equal(types(last), ['resolve:o']);
  assert.equal(last.finished, {
    status: 'completed',
    outcome: 'completed',
    outputs: [{ nodeId: 'o', name: 'o', type: 'text', value: 'L+R' }],
    reason: null,
  });
});

test('a step whose dependency is unknown never becomes ready and planning does not throw', () => {
  const graph = g(text('a', '{{ghost}}'), out('o', 'missing.path'));
  const p = plan(state(graph));
  assert.equal(p, { actions: [], waiting: null, finished: null });
});

test('a node that depends on itself never runs', () => {
  const p = plan(state(g(text('a', '{{a}}'))));
  assert.equal(p, { actions: [], waiting: null, finished: null });
});

// ---------------------------------------------------------------------------------------------------
// Delay nodes

test('a ready delay starts a timer due seconds after now and the run waits for it', () => {
  const graph = g(delay('d', 30), text('t', 'after', { after: ['d'] }));
  const p = plan(state(graph));
  assert.equal(p.actions, [{ type: 'start_timer', nodeId: 'd', dueAt: NOW + 30_000 }]);
  const s = apply(state(graph), p.actions);
  assert.equal(plan(s), { actions: [], waiting: { kind: 'timer', until: NOW + 30_000 }, finished: null });
});

test('a timer that is not yet due is not started again', () => {
  const graph = g(delay('d', 30));
  const p = plan(state(graph, { timers: { d: NOW + 1 } }));
  assert.equal(p, { actions: [], waiting: { kind: 'timer', until: NOW + 1 }, finished: null });
});

test('a due timer fires and its dependents become ready in the same plan', () => {
  const graph = g(delay('d', 30), text('t', 'after', { after: ['d'] }), out('o', 'd'));
  const p = plan(state(graph, { timers: { d: NOW } }));
  assert.equal(p.actions, [
    { type: 'fire_timer', nodeId: 'd' },
    { type: 'execute', nodeId: 't', kind: 'text.template' },
    { type: 'resolve', nodeId: 'o', value: null },
  ]);
});

test('a zero-second delay starts and fires in the same plan', () => {
  const graph = g(delay('d', 0), out('o', 'd'));
  const p = plan(state(graph));
  assert.equal(p.actions, [
    { type: 'start_timer', nodeId: 'd', dueAt: NOW },
    { type: 'fire_timer', nodeId: 'd' },
    { type: 'resolve', nodeId: 'o', value: null },
  ]);
  assert.equal(p.finished?.status, 'completed');
});

test('a delay waits for its own dependencies before starting', () => {
  const graph = g(text('a', 'x'), delay('d', 5, { after: ['a'] }));
  assert.equal(types(plan(state(graph))), ['execute:a']);
  assert.equal(plan(state(graph, { results: { a: ok('x') } })).actions, [{ type: 'start_timer', nodeId: 'd', dueAt: NOW + 5000 }]);
});

test('a delay with a result starts no timer', () => {
  const p = plan(state(g(delay('d', 5)), { results: { d: ok(null) } }));
  assert.is(p.actions.length, 0);
  assert.ok(p.finished);
});

test('with several timers pending the run waits until the earliest', () => {
  const graph = g(delay('a', 10), delay('b', 5), delay('c', 20));
  const p = plan(state(graph, { timers: { a: NOW + 10_000, b: NOW + 5_000, c: NOW + 20_000 } }));
  assert.equal(p.waiting, { kind: 'timer', until: NOW + 5_000 });
});

test('only the due timers fire when several are pending', () => {
  const graph = g(delay('a', 10), delay('b', 5));
  const p = plan(state(graph, { timers: { a: NOW + 1, b: NOW - 1 } }));
  assert.equal(p.actions, [{ type: 'fire_timer', nodeId: 'b' }]);
  assert.is(p.waiting, null);
});

test('a run with a step running and a timer pending waits on running', () => {
  const graph = g(delay('d', 10), text('t', 'x'));
  const p = plan(state(graph, { timers: { d: NOW + 10 }, running: ['t'] }));
  assert.equal(p, { actions: [], waiting: { kind: 'running' }, finished: null });
});

test('a skipped dependency skips a delay instead of starting its timer', () => {
  const graph = g(text('a', 'x'), delay('d', 5, { after: ['a'] }));
  const p = plan(state(graph, { results: { a: fail('boom') } }));
  assert.equal(p.actions, [{ type: 'skip', nodeId: 'd', reason: 'upstream_failed' }]);
});

// ---------------------------------------------------------------------------------------------------
// Condition nodes

function evaluate(value: string, op: ConditionOp, operand: JsonValue | undefined, inputs: Record<string, JsonValue> = {}): boolean {
  const nodes: GraphNode[] = [...Object.keys(inputs).map((id) => input(id)), cond('c', value, op, operand)];
  const p = plan(state(g(...nodes), { inputs }));
  const action = p.actions.find((a) => a.nodeId === 'c');
  assert.ok(action && action.type === 'resolve', 'the condition resolves');
  return (action as { value: boolean }).value;
}

const conditionCases: [string, ConditionOp, JsonValue | undefined, Record<string, JsonValue>, boolean][] = [
  // equals / not_equals
  ['{{x}}', 'equals', 'yes', { x: 'yes' }, true],
  ['{{x}}', 'equals', 'yes', { x: 'Yes' }, false],
  ['{{x}}', 'equals', 'yes', { x: 'yes ' }, false],
  ['{{x}}', 'equals', '5', { x: 5 }, true],
  ['{{x}}', 'equals', '5', { x: '5.0' }, false],
  ['{{x}}', 'equals', 5, { x: '5.0' }, true],
  ['{{x}}', 'equals', 5, { x: ' 5 ' }, true],
  ['{{x}}', 'equals', 5, { x: 6 }, false],
  ['{{x}}', 'equals', 0.5, { x: '.5' }, true],
  ['{{x}}', 'equals', 5, { x: 'five' }, false],
  ['{{x}}', 'equals', true, { x: true }, true],
  ['{{x}}', 'equals', true, { x: 'false' }, false],
  ['{{x}}', 'equals', null, { x: null }, true],
  ['{{x}}', 'equals', { a: 1 }, { x: { a: 1 } }, true],
  ['{{x}}', 'not_equals', 'yes', { x: 'no' }, true],
  ['{{x}}', 'not_equals', 'yes', { x: 'yes' }, false],
  ['{{x}}', 'not_equals', 5, { x: '5.00' }, false],
  // contains
  ['{{x}}', 'contains', 'ell', { x: 'hello' }, true],
  ['{{x}}', 'contains', 'xyz', { x: 'hello' }, false],
  ['{{x}}', 'contains', 'b', { x: ['a', 'b'] }, true],
  ['{{x}}', 'contains', 'c', { x: ['a', 'b'] }, false],
  ['{{x}}', 'contains', 'ap', { x: ['apple'] }, false],
  ['{{x}}', 'contains', 2, { x: [1, 2, 3] }, true],
  ['{{x}}', 'contains', '2', { x: [1, 2, 3] }, true],
  ['{{x}}', 'contains', { id: 1 }, { x: [{ id: 1 }] }, true],
  ['{{x}}', 'contains', 42, { x: 'answer 42' }, true],
  ['{{x}}', 'contains', 'a', { x: '[not json' }, false],
  ['{{x}}', 'contains', '[not', { x: '[not json' }, true],
  // gt / gte / lt / lte
  ['{{x}}', 'gt', 3, { x: 4 }, true],
  ['{{x}}', 'gt', 3, { x: 3 }, false],
  ['{{x}}', 'gt', '10', { x: '9' }, false],
  ['{{x}}', 'gt', 3, { x: 'abc' }, false],
  ['{{x}}', 'gt', 'abc', { x: 4 }, false],
  ['{{x}}', 'gt', 3, { x: '' }, false],
  ['{{x}}', 'gte', 3, { x: 3 }, true],
  ['{{x}}', 'gte', 3, { x: 2.9 }, false],
  ['{{x}}', 'lt', 3, { x: -1 }, true],
  ['{{x}}', 'lt', 3, { x: 3 }, false],
  ['{{x}}', 'lte', 3, { x: 3 }, true],
  ['{{x}}', 'lte', 3, { x: '1e1' }, false],
  ['{{x}}', 'lt', true, { x: 0 }, false],
  ['{{x}}', 'gt', 0, { x: 'Infinity' }, false],
  ['{{x}}', 'gt', 0, { x: '0x10' }, false],
  // is_empty / not_empty
  ['{{x}}', 'is_empty', undefined, { x: '' }, true],
  ['{{x}}', 'is_empty', undefined, { x: '  \n\t' }, true],
  ['{{x}}', 'is_empty', undefined, { x: null }, true],
  ['{{x}}', 'is_empty', undefined, { x: 'a' }, false],
  ['{{x}}', 'not_empty', undefined, { x: ' a ' }, true],
  ['{{x}}', 'not_empty', undefined, { x: '   ' }, false],
  ['{{x}}', 'not_empty', undefined, { x: 0 }, true],
  // templates with surrounding text and paths
  ['size={{x}}', 'equals', 'size=3', { x: 3 }, true],
  ['{{x.items.1}}', 'equals', 'b', { x: { items: ['a', 'b'] } }, true],
  ['{{x.missing}}', 'is_empty', undefined, { x: { items: [] } }, true],
  ['literal', 'equals', 'literal', {}, true],
];

for (const [value, op, operand, inputs, expected] of conditionCases) {
  test(`condition ${op} ${JSON.stringify(operand)} on ${value} with ${JSON.stringify(inputs)} is ${expected}`, () => {
    assert.is(evaluate(value, op, operand, inputs), expected);
  });
}

test('a condition without an operand compares against the empty string', () => {
  assert.is(evaluate('{{x}}', 'equals', undefined, { x: '' }), true);
  assert.is(evaluate('{{x}}', 'contains', undefined, { x: 'anything' }), true);
});

test('an unknown condition op evaluates to false rather than throwing', () => {
  const node = { id: 'c', kind: 'condition', value: 'x', op: 'matches' } as unknown as GraphNode;
  assert.equal(plan(state(g(node))).actions, [{ type: 'resolve', nodeId: 'c', value: false }]);
});

test('a condition reads the value of a completed step', () => {
  const graph = g(text('t', 'x'), cond('c', '{{t}}', 'contains', 'urgent'));
  const p = plan(state(graph, { results: { t: ok('this is urgent!') } }));
  assert.equal(p.actions, [{ type: 'resolve', nodeId: 'c', value: true }]);
});

test('an unset optional input renders as an empty string in a condition', () => {
  const graph = g(input('opt'), cond('c', '[{{opt}}]', 'equals', '[]'), cond('e', '{{opt}}', 'is_empty'));
  const p = plan(state(graph));
  assert.equal(p.actions, [
    { type: 'resolve', nodeId: 'opt', value: null },
    { type: 'resolve', nodeId: 'c', value: true },
    { type: 'resolve', nodeId: 'e', value: true },
  ]);
});

test('an unset optional input renders as an empty string in a template step', () => {
  const graph = g(input('opt'), text('t', 'Hello {{opt}}!'), out('o', 't'));
  const { state: end } = drive(state(graph));
  assert.equal(end.results.t, ok('Hello !'));
});

// ---------------------------------------------------------------------------------------------------
// Branching on conditions

const branchGraph = () =>
  g(
    input('n', 'input.number'),
    cond('big', '{{n}}', 'gt', 10),
    text('yes', 'big {{n}}', { when: { node: 'big', is: true } }),
    text('no', 'small {{n}}', { when: { node: 'big', is: false } }),
    out('yesOut', 'yes'),
    out('noOut', 'no'),
  );

test('the branch matching the condition runs and the other is skipped with condition_false', () => {
  const p = plan(state(branchGraph(), { inputs: { n: 50 } }));
  assert.equal(p.actions, [
    { type: 'resolve', nodeId: 'n', value: 50 },
    { type: 'resolve', nodeId: 'big', value: true },
    { type: 'execute', nodeId: 'yes', kind: 'text.template' },
    { type: 'skip', nodeId: 'no', reason: 'condition_false' },
    { type: 'skip', nodeId: 'noOut', reason: 'condition_false' },
  ]);
});

test('the false branch runs when the condition is false', () => {
  const p = plan(state(branchGraph(), { inputs: { n: 1 } }));
  assert.equal(types(p), ['resolve:n', 'resolve:big', 'skip:yes', 'execute:no', 'skip:yesOut']);
});

test('a run whose only skipped output was skipped by a condition completes with outcome completed', () => {
  const { state: end, plans } = drive(state(branchGraph(), { inputs: { n: 50 } }));
  const last = plans.at(-1)!;
  assert.equal(last.finished, {
    status: 'completed',
    outcome: 'completed',
    outputs: [{ nodeId: 'yesOut', name: 'yesOut', type: 'text', value: 'big 50' }],
    reason: null,
  });
  assert.equal(end.results.noOut, skipped('condition_false'));
});

test('a run whose every output was skipped by a condition completes with zero outputs', () => {
  const graph = g(cond('c', 'a', 'equals', 'b'), out('o', 'c', { when: { node: 'c', is: true } }));
  const p = plan(state(graph));
  assert.equal(types(p), ['resolve:c', 'skip:o']);
  assert.equal(p.finished, { status: 'completed', outcome: 'completed', outputs: [], reason: null });
});

test('condition_false skips cascade through a chain in one plan', () => {
  const graph = g(
    cond('c', 'x', 'equals', 'y'),
    text('a', 'a', { when: { node: 'c', is: true } }),
    text('b', '{{a}}'),
    delay('d', 5, { after: ['b'] }),
    out('o', 'b'),
  );
  const p = plan(state(graph));
  assert.equal(p.actions, [
    { type: 'resolve', nodeId: 'c', value: false },
    { type: 'skip', nodeId: 'a', reason: 'condition_false' },
    { type: 'skip', nodeId: 'b', reason: 'condition_false' },
    { type: 'skip', nodeId: 'd', reason: 'condition_false' },
    { type: 'skip', nodeId: 'o', reason: 'condition_false' },
  ]);
  assert.equal(p.finished?.outcome, 'completed');
});

test('a when on a non-boolean completed value counts as no match', () => {
  const graph = g(text('t', 'x'), text('a', 'a', { when: { node: 't', is: true } }));
  assert.equal(plan(state(graph, { results: { t: ok('true') } })).actions, [{ type: 'skip', nodeId: 'a', reason: 'condition_false' }]);
});

test('a node guarded by a condition that failed is skipped upstream_failed', () => {
  const graph = g(cond('c', 'x', 'equals', 'x'), text('a', 'a', { when: { node: 'c', is: true } }));
  assert.equal(plan(state(graph, { results: { c: fail('bad') } })).actions, [{ type: 'skip', nodeId: 'a', reason: 'upstream_failed' }]);
});

test('a node guarded by a skipped condition inherits the skip reason', () => {
  const graph = g(cond('c', 'x', 'equals', 'x'), text('a', 'a', { when: { node: 'c', is: false } }));
  assert.equal(plan(state(graph, { results: { c: skipped('condition_false') } })).actions, [{ type: 'skip', nodeId: 'a', reason: 'condition_false' }]);
});

test('a matching when does not override a skipped dependency', () => {
  const graph = g(cond('c', 'x', 'equals', 'x'), text('s', 's'), text('a', '{{s}}', { when: { node: 'c', is: true } }));
  assert.equal(plan(state(graph, { results: { s: skipped('condition_false') } })).actions, [
    { type: 'resolve', nodeId: 'c', value: true },
    { type: 'skip', nodeId: 'a', reason: 'condition_false' },
  ]);
});

// ---------------------------------------------------------------------------------------------------
// Failure propagation

test('a failed step skips its dependents with upstream_failed through the whole chain in one plan', () => {
  const graph = g(text('a', 'a'), text('b', '{{a}}'), cond('c', '{{b}}', 'is_empty'), text('d', 'd', { when: { node: 'c', is: true } }), out('o', 'd'));
  const p = plan(state(graph, { results: { a: fail('provider timeout') } }));
  assert.equal(p.actions, [
    { type: 'skip', nodeId: 'b', reason: 'upstream_failed' },
    { type: 'skip', nodeId: 'c', reason: 'upstream_failed' },
    { type: 'skip', nodeId: 'd', reason: 'upstream_failed' },
    { type: 'skip', nodeId: 'o', reason: 'upstream_failed' },
  ]);
  assert.equal(p.finished, { status: 'failed', outcome: null, outputs: [], reason: 'provider timeout' });
});

test('upstream_failed wins over condition_false when both are among the dependencies', () => {
  const graph = g(text('a', 'a'), text('b', 'b'), text('j', '{{a}}{{b}}'), text('k', '{{b}}{{a}}'));
  const p = plan(state(graph, { results: { a: skipped('condition_false'), b: fail('x') } }));
  assert.equal(p.actions, [
    { type: 'skip', nodeId: 'j', reason: 'upstream_failed' },
    { type: 'skip', nodeId: 'k', reason: 'upstream_failed' },
  ]);
});

test('an upstream_failed skip propagates as upstream_failed', () => {
  const graph = g(text('a', 'a'), out('o', 'a'));
  assert.equal(plan(state(graph, { results: { a: skipped('upstream_failed') } })).actions, [{ type: 'skip', nodeId: 'o', reason: 'upstream_failed' }]);
});

test('a failure in one branch does not stop the parallel branch', () => {
  const graph = g(text('a', 'a'), text('b', 'b'), out('oa', 'a'), out('ob', 'b'));
  const p = plan(state(graph, { results: { a: fail('bad') } }));
  assert.equal(types(p), ['execute:b', 'skip:oa']);
  assert.equal(p.waiting, null);
  assert.is(p.finished, null);
});

// ---------------------------------------------------------------------------------------------------
// Outputs and finishing

test('an output reads into the JSON value of its source with a path', () => {
  const graph = g({ id: 'p', kind: 'json.parse', from: 'raw' }, input('raw', 'input.json'), out('o', 'p.items.1.name'));
  const p = plan(state(graph, { inputs: { raw: '{}' }, results: { raw: ok('{}'), p: ok({ items: [{ name: 'a' }, { name: 'b' }] }) } }));
  assert.equal(p.actions, [{ type: 'resolve', nodeId: 'o', value: 'b' }]);
  assert.equal(p.finished?.outputs, [{ nodeId: 'o', name: 'o', type: 'text', value: 'b' }]);
});

test('an output path into a string value parses the string as JSON', () => {
  const graph = g(text('t', '{"n": 3}'), out('o', 't.n'));
  const p = plan(state(graph, { results: { t: ok('{"n": 3}') } }));
  assert.equal(p.actions, [{ type: 'resolve', nodeId: 'o', value: 3 }]);
  assert.equal(p.finished?.outputs[0]?.type, 'number');
});

test('an output path that does not exist yields null', () => {
  const graph = g(text('t', 'plain'), out('o', 't.a.b'), out('o2', 't.0'));
  const p = plan(state(graph, { results: { t: ok('plain') } }));
  assert.equal(p.actions, [
    { type: 'resolve', nodeId: 'o', value: null },
    { type: 'resolve', nodeId: 'o2', value: null },
  ]);
});

test('an output without a path yields the whole value', () => {
  const graph = g(input('j', 'input.json'), out('o', 'j'));
  const p = plan(state(graph, { inputs: { j: { a: [1, 2] } } }));
  assert.equal(p.finished?.outputs, [{ nodeId: 'o', name: 'o', type: 'json', value: { a: [1, 2] } }]);
});

test('output fields take name and type from the node, else the id and the inferred type', () => {
  const graph = g(
    input('s'),
    input('n', 'input.number'),
    input('b'),
    input('j', 'input.json'),
    input('z'),
    out('o1', 's', { name: 'Summary', type: 'markdown' }),
    out('o2', 'n'),
    out('o3', 'b'),
    out('o4', 'j'),
    out('o5', 'z'),
  );
  const p = plan(state(graph, { inputs: { s: 'x', n: 1.5, b: false, j: [1] } }));
  assert.equal(p.finished?.outputs, [
    { nodeId: 'o1', name: 'Summary', type: 'markdown', value: 'x' },
    { nodeId: 'o2', name: 'o2', type: 'number', value: 1.5 },
    { nodeId: 'o3', name: 'o3', type: 'boolean', value: false },
    { nodeId: 'o4', name: 'o4', type: 'json', value: [1] },
    { nodeId: 'o5', name: 'o5', type: 'json', value: null },
  ]);
});

test('outputs are listed in graph order, not in resolution order', () => {
  const graph = g(out('late', 't'), out('early', 'a'), input('a'), text('t', 't'));
  const p = plan(state(graph, { inputs: { a: 'A' }, results: { t: ok('T'), a: ok('A'), early: ok('A') } }));
  assert.equal(
    p.finished?.outputs.map((o) => o.nodeId),
    ['late', 'early'],
  );
});

test('a run with outputs and a failed step completes with issues', () => {
  const graph = g(text('a', 'a'), text('b', 'b'), out('oa', 'a'), out('ob', 'b'));
  const p = plan(state(graph, { results: { a: ok('A'), b: fail('http 500') } }));
  assert.equal(p.finished, {
    status: 'completed',
    outcome: 'completed_with_issues',
    outputs: [{ nodeId: 'oa', name: 'oa', type: 'text', value: 'A' }],
    reason: null,
  });
});

test('a run with failures and no output fails with the first failed node in graph order', () => {
  const graph = g(text('a', 'a'), text('b', 'b'), out('o', 'a', { after: ['b'] }));
  const p = plan(state(graph, { results: { b: fail('second'), a: fail('first') } }));
  assert.equal(p.finished, { status: 'failed', outcome: null, outputs: [], reason: 'first' });
});

test('a run with a failed step and no output nodes at all fails', () => {
  const p = plan(state(g(text('a', 'a')), { results: { a: fail('nope') } }));
  assert.equal(p, { actions: [], waiting: null, finished: { status: 'failed', outcome: null, outputs: [], reason: 'nope' } });
});

test('a run without output nodes and without failures completes', () => {
  const p = plan(state(g(text('a', 'a')), { results: { a: ok('A') } }));
  assert.equal(p.finished, { status: 'completed', outcome: 'completed', outputs: [], reason: null });
});

test('an empty graph is finished at once', () => {
  assert.equal(plan(state(g())), {
    actions: [],
    waiting: null,
    finished: { status: 'completed', outcome: 'completed', outputs: [], reason: null },
  });
});

test('a graph of only free nodes finishes in a single plan together with its actions', () => {
  const graph = g(input('name'), cond('has', '{{name}}', 'not_empty'), out('o', 'name', { when: { node: 'has', is: true } }));
  const p = plan(state(graph, { inputs: { name: 'Ada' } }));
  assert.equal(types(p), ['resolve:name', 'resolve:has', 'resolve:o']);
  assert.is(p.waiting, null);
  assert.equal(p.finished?.outputs, [{ nodeId: 'o', name: 'o', type: 'text', value: 'Ada' }]);
});

test('the run is not finished while a step is running even if the rest is done', () => {
  const graph = g(text('a', 'a'), text('b', 'b'));
  const p = plan(state(graph, { results: { a: ok('A') }, running: ['b'] }));
  assert.equal(p, { actions: [], waiting: { kind: 'running' }, finished: null });
});

test('the run is not finished while a timer is pending', () => {
  const graph = g(text('a', 'a'), delay('d', 1));
  const p = plan(state(graph, { results: { a: ok('A') }, timers: { d: NOW + 1000 } }));
  assert.equal(p, { actions: [], waiting: { kind: 'timer', until: NOW + 1000 }, finished: null });
});

test('a full run with steps, a delay and a condition drives to completion', () => {
  const graph = g(
    input('topic'),
    text('draft', 'About {{topic}}'),
    delay('wait', 60),
    cond('long', '{{draft}}', 'contains', 'cats', { after: ['wait'] }),
    text('cats', 'meow: {{draft}}', { when: { node: 'long', is: true } }),
    out('result', 'cats', { name: 'Result' }),
  );
  const { state: end, plans } = drive(state(graph, { inputs: { topic: 'cats' } }));
  assert.equal(types(plans[0]!), ['resolve:topic', 'execute:draft', 'start_timer:wait']);
  assert.equal(plans.at(-1)!.finished, {
    status: 'completed',
    outcome: 'completed',
    outputs: [{ nodeId: 'result', name: 'Result', type: 'text', value: 'meow: About cats' }],
    reason: null,
  });
  assert.is(end.now, NOW + 60_000);
});

// ---------------------------------------------------------------------------------------------------
// Order, determinism, purity

test('actions come in topological order even when the graph lists dependents first', () => {
  const graph = g(out('o', 'c'), cond('c', '{{b}}', 'equals', 'B'), input('b'), text('t', '{{b}}'));
  const p = plan(state(graph, { inputs: { b: 'B' } }));
  assert.equal(types(p), ['resolve:b', 'resolve:c', 'resolve:o', 'execute:t']);
});

test('ties between independent nodes follow graph order', () => {
  const graph = g(text('z', 'z'), text('a', 'a'), input('m'), text('b', 'b'));
  assert.equal(types(plan(state(graph))), ['execute:z', 'execute:a', 'resolve:m', 'execute:b']);
});

test('the same input always gives the same plan', () => {
  const s = state(branchGraph(), { inputs: { n: 50 } });
  assert.equal(plan(s), plan(s));
  const t = state(g(delay('d', 3), text('x', 'x')), { timers: { d: NOW - 5 }, running: [] });
  assert.equal(plan(t), plan(structuredClone(t)));
});

test('planning does not mutate its input', () => {
  const s = state(branchGraph(), { inputs: { n: 50 }, timers: {}, running: [] });
  const before = structuredClone(s);
  plan(s);
  assert.equal(s, before);
});

test('results, timers and running entries for nodes outside the graph are ignored', () => {
  const graph = g(text('a', 'a'));
  const p = plan(state(graph, { results: { ghost: fail('x') }, timers: { ghost: NOW + 5 }, running: ['phantom'] }));
  assert.equal(types(p), ['execute:a']);
  const done = plan(state(graph, { results: { a: ok('A'), ghost: fail('x') }, running: ['phantom'] }));
  assert.equal(done.finished, { status: 'completed', outcome: 'completed', outputs: [], reason: null });
});

test('a node listed in running that already has a result counts as finished', () => {
  const p = plan(state(g(text('a', 'a')), { results: { a: ok('A') }, running: ['a'] }));
  assert.ok(p.finished);
});

test('the plan source stays free of clocks, randomness and Node imports', async () => {
  const { readFile } = await import('node:fs/promises');
  const src = await readFile(new URL('../../src/domain/graph/interpreter.ts', import.meta.url), 'utf8');
  assert.not.match(src, /Date\.now|new Date|Math\.random|from 'node:|require\(|performance\./);
});

// ---------------------------------------------------------------------------------------------------
// Property: random DAGs always run to a consistent end

const OPS: ConditionOp[] = ['equals', 'not_equals', 'contains', 'gt', 'gte', 'lt', 'lte', 'is_empty', 'not_empty'];

type Spec = { kind: 0 | 1 | 2 | 3; refs: number[]; op: number; operand: number; when: number; is: boolean; fail: boolean };

const specArb: fc.Arbitrary<Spec> = fc.record({
  kind: fc.constantFrom(0 as const, 1 as const, 2 as const, 3 as const),
  refs: fc.array(fc.nat(40), { maxLength: 3 }),
  op: fc.nat(OPS.length - 1),
  operand: fc.nat(5),
  when: fc.integer({ min: -1, max: 40 }),
  is: fc.boolean(),
  fail: fc.boolean(),
});

/** Node i references only nodes before it (a DAG); kind 0 text.template, 1 condition, 2 output, 3 input. */
function buildGraph(specs: Spec[]): Graph {
  const nodes: GraphNode[] = [];
  specs.forEach((s, i) => {
    const id = `n${i}`;
    const refs = i === 0 ? [] : [...new Set(s.refs.map((r) => `n${r % i}`))];
    const template = refs.map((r) => `{{${r}}}`).join(' ') || 'lit';
    const conditions = nodes.filter((n) => n.kind === 'condition');
    const when = s.when >= 0 && conditions.length > 0 ? { when: { node: conditions[s.when % conditions.length]!.id, is: s.is } } : {};
    const operands: JsonValue[] = ['', 'lit', 1, '1', true, null];
    if (s.kind === 0) nodes.push({ id, kind: 'text.template', template, ...when });
    else if (s.kind === 1) nodes.push({ id, kind: 'condition', value: template, op: OPS[s.op]!, operand: operands[s.operand]!, ...when } as ConditionNode);
    else if (s.kind === 2 && refs.length > 0) nodes.push({ id, kind: 'output', from: refs[0]!, after: refs.slice(1), ...when });
    else if (s.kind === 2) nodes.push({ id, kind: 'output', from: 'n0', ...(i === 0 ? {} : when) });
    else nodes.push({ id, kind: 'input.text' });
  });
  // An output as the first node would reference itself; make node 0 an input in that case.
  if (nodes[0]?.kind === 'output') nodes[0] = { id: 'n0', kind: 'input.text' };
  return { nodes };
}

/**
 * Runs the graph plan by plan, applying actions one at a time and checking each is consistent with the
 * state so far. `completeOrder` picks which running step completes next; `failures` says which fail.
 */
function simulate(graph: Graph, picks: number[], failing: Set<string>) {
  let s = state(graph, { inputs: { n0: 'lit' } });
  const resultCount = new Map<string, number>();
  let pick = 0;
  for (let round = 0; round < graph.nodes.length * 4 + 10; round++) {
    const p = plan(s);
    assert.equal(plan(s), p, 'plan is deterministic');
    if (p.actions.length > 0 && p.waiting !== null) assert.unreachable('waiting is null when there are actions');
    for (const a of p.actions) {
      const node = graph.nodes.find((n) => n.id === a.nodeId)!;
      if (a.type !== 'fire_timer') {
        for (const d of dependencies(node)) assert.ok(s.results[d], `${a.nodeId} acted before its dependency ${d}`);
      }
      assert.not.ok(s.results[a.nodeId], `${a.nodeId} acted twice`);
      assert.not.ok(s.running.includes(a.nodeId), `${a.nodeId} executed while running`);
      s = apply(s, [a]);
      if (a.type === 'resolve' || a.type === 'skip') resultCount.set(a.nodeId, (resultCount.get(a.nodeId) ?? 0) + 1);
    }
    if (p.finished) {
      assert.equal(p.waiting, null);
      return { s, p, resultCount };
    }
    if (p.actions.length === 0) {
      assert.equal(p.waiting, { kind: 'running' }, 'only running steps can block a graph without delays');
      const id = s.running[picks[pick++ % Math.max(picks.length, 1)]! % s.running.length] ?? s.running[0]!;
      s = complete(s, id, failing.has(id) ? fail(`failed ${id}`) : defaultStep(graph.nodes.find((n) => n.id === id)!, s));
      resultCount.set(id, (resultCount.get(id) ?? 0) + 1);
    }
  }
  assert.unreachable('the run did not finish');
  throw new Error('unreachable');
}

test('property: random DAGs with successful steps always finish with exactly one result per node', () => {
  fc.assert(
    fc.property(fc.array(specArb, { minLength: 1, maxLength: 25 }), fc.array(fc.nat(20), { maxLength: 10 }), (specs, picks) => {
      const graph = buildGraph(specs);
      const { s, p, resultCount } = simulate(graph, picks, new Set());
      assert.ok(p.finished);
      assert.equal(Object.keys(s.results).sort(), graph.nodes.map((n) => n.id).sort());
      for (const n of graph.nodes) assert.is(resultCount.get(n.id), 1, `${n.id} has one result`);
      assert.is(s.running.length, 0);
      assert.is(p.finished.status, 'completed');
      assert.is(p.finished.outcome, 'completed');
      const completedOutputs = graph.nodes.filter((n) => n.kind === 'output' && s.results[n.id]?.status === 'completed');
      assert.equal(
        p.finished.outputs.map((o) => o.nodeId),
        completedOutputs.map((n) => n.id),
      );
      for (const n of graph.nodes) assert.not.equal(s.results[n.id], skipped('upstream_failed'));
    }),
    { numRuns: 300 },
  );
});

test('property: with random step failures runs still finish, and the outcome matches the failures', () => {
  fc.assert(
    fc.property(fc.array(specArb, { minLength: 1, maxLength: 25 }), fc.array(fc.nat(20), { maxLength: 10 }), (specs, picks) => {
      const graph = buildGraph(specs);
      const failing = new Set(graph.nodes.filter((n, i) => n.kind === 'text.template' && specs[i]!.fail).map((n) => n.id));
      const { s, p, resultCount } = simulate(graph, picks, failing);
      const f = p.finished!;
      for (const n of graph.nodes) assert.is(resultCount.get(n.id), 1, `${n.id} has one result`);
      const anyFailed = graph.nodes.some((n) => s.results[n.id]?.status === 'failed');
      if (!anyFailed) assert.equal([f.status, f.outcome], ['completed', 'completed']);
      else if (f.outputs.length > 0) assert.equal([f.status, f.outcome, f.reason], ['completed', 'completed_with_issues', null]);
      else assert.equal([f.status, f.outcome], ['failed', null]);
      for (const n of graph.nodes) {
        const deps = dependencies(n);
        const r = s.results[n.id]!;
        if (deps.some((d) => s.results[d]?.status === 'failed')) assert.equal(r, skipped('upstream_failed'));
      }
    }),
    { numRuns: 300 },
  );
});

test.run();
