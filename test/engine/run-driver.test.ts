import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { GraphNode, NodeResult } from '../../src/domain/graph/types.ts';
import { nextRunMove, RunDriver, type DriverMove } from '../../src/domain/graph/run-driver.ts';
import type { RunPhase } from '../../src/domain/run-status.ts';

/**
 * The run driver on its own: pure moves from a run's state, no database, no engine. The engines'
 * suites (engine-contract, embedded-engine, the Temporal tests) check what the moves do end to end.
 */

const NOW = 1_800_000_000_000;
const text = (id: string, template: string, extra: Record<string, unknown> = {}) => ({ id, kind: 'text.template', template, ...extra }) as GraphNode;
const out = (id: string, from: string) => ({ id, kind: 'output', from }) as GraphNode;
const llm = (id: string, extra: Record<string, unknown> = {}) => ({ id, kind: 'llm.chat', provider: 'openai', model: 'm', prompt: 'p', ...extra }) as GraphNode;
const done = (value: string): NodeResult => ({ status: 'completed', value });

function driver(nodes: GraphNode[], status = 'running', results: Record<string, NodeResult> = {}, running: string[] = []) {
  return new RunDriver({ status, graph: { nodes }, inputs: {}, progress: { results, timers: {} } }, running);
}

const kinds = (moves: DriverMove[]) => moves.map((m) => m.kind);

test('nextRunMove: what a run waits for, from its status columns', () => {
  const at = (
    status: string | null,
    phase: RunPhase | null = null,
    suspendReason: 'wait_timer' | 'wait_signal' | null = null,
    resumeAt: number | null = null,
  ) => nextRunMove({ status, phase, suspendReason, resumeAt }, NOW).kind;
  assert.is(at(null), 'end');
  assert.is(at('cancelled'), 'end');
  assert.is(at('pending', 'queued'), 'await_admission');
  assert.is(at('pending', 'starting'), 'advance');
  assert.is(at('pending', 'preparing'), 'prepare');
  assert.is(at('suspended', null, 'wait_timer', NOW + 1), 'park');
  assert.is(at('suspended', null, 'wait_timer', NOW), 'resume_timer');
  assert.is(at('suspended', null, 'wait_signal'), 'await_credentials');
  assert.is(at('running'), 'advance');
  assert.equal(nextRunMove({ status: 'suspended', phase: null, suspendReason: 'wait_timer', resumeAt: NOW + 5 }, NOW), { kind: 'park', until: NOW + 5 });
});

test('an admitted run of three templates is computed in memory and started, recorded and finished by one completion', () => {
  const d = driver([text('t1', 'a'), text('t2', '{{t1}}b'), text('t3', '{{t2}}c'), out('o', 't3')], 'pending');
  const moves: DriverMove[] = [];
  let finish = d.next(NOW);
  for (; finish.kind === 'compute'; finish = d.next(NOW)) {
    moves.push(finish);
    for (const id of finish.steps) d.computed(id, done(id), []);
  }
  assert.equal(kinds(moves), ['compute', 'compute', 'compute']);
  assert.is(finish.kind, 'finish');
  if (finish.kind !== 'finish') return;
  assert.is(finish.start, true, 'started in the completion transaction');
  assert.equal(
    finish.batch!.entries.map((e) => ('step' in e ? e.step : 'actions')),
    ['t1', 't2', 't3'],
  );
  assert.equal(finish.actions, [{ type: 'resolve', nodeId: 'o', value: 't3' }]);
  d.finished(true);
  assert.equal(d.next(NOW), { kind: 'done' });
  assert.equal(d.completion?.status, 'completed');
});

test('an I/O step is started after the start and the batch before it, then waited for; its result finishes the run', () => {
  const d = driver([text('t', 'x'), llm('l', { after: ['t'] }), out('o', 'l')], 'pending');
  const compute = d.next(NOW);
  assert.equal(compute, { kind: 'compute', steps: ['t'] });
  d.computed('t', done('x'), ['x']);
  assert.equal(d.next(NOW), { kind: 'start' });
  d.started('running');
  const record = d.next(NOW);
  assert.is(record.kind, 'record_batch');
  d.batchRecorded(true);
  const execute = d.next(NOW);
  assert.equal(execute.kind === 'execute' && execute.steps, ['l']);
  assert.equal(d.next(NOW), { kind: 'wait', due: null });
  d.stepDone('l', { type: 'recorded', result: done('hi') });
  const finish = d.next(NOW);
  assert.is(finish.kind === 'finish' && finish.start, false);
});

test('steps in flight are planned as running: never started twice, and no batching beside them', () => {
  const d = driver([llm('a'), llm('b'), text('t', 'x', { after: ['a'] }), out('o1', 't'), out('o2', 'b')], 'running', { a: done('A') }, ['b']);
  const execute = d.next(NOW);
  assert.equal(execute.kind === 'execute' && execute.steps, ['t'], 'the template runs as a step while b is in flight');
  assert.equal(d.next(NOW), { kind: 'wait', due: null });
});

test('a delay with nothing else to do suspends the run (wait_timer) and parks until its due time', () => {
  const d = driver([{ id: 'w', kind: 'delay', seconds: 2 } as GraphNode, text('b', 'y', { after: ['w'] }), out('o', 'b')]);
  const apply = d.next(NOW);
  assert.equal(apply, { kind: 'apply', actions: [{ type: 'start_timer', nodeId: 'w', dueAt: NOW + 2_000 }] });
  d.applied(true);
  assert.equal(d.next(NOW), { kind: 'suspend_timer', until: NOW + 2_000 });
  d.suspended(true);
  assert.equal(d.next(NOW), { kind: 'park', until: NOW + 2_000 });
});

test('a graph that can never progress is failed as stuck', () => {
  const d = driver([text('a', '{{b}}'), text('b', '{{a}}'), out('o', 'a')]);
  assert.equal(d.next(NOW), { kind: 'fail_stuck' });
});

test('a step that suspends (credentials) or fails blocks planning; the driver reloads or fails once nothing is in flight', () => {
  const d = driver([llm('a'), llm('b'), out('o1', 'a'), out('o2', 'b')]);
  const execute = d.next(NOW);
  assert.equal(execute.kind === 'execute' && execute.steps, ['a', 'b']);
  d.next(NOW);
  d.stepDone('a', { type: 'suspended' });
  assert.equal(d.next(NOW), { kind: 'wait', due: null }, 'b is still in flight');
  d.stepDone('b', { type: 'recorded', result: done('B') });
  assert.equal(d.next(NOW), { kind: 'reload' });

  const e = driver([llm('a'), out('o', 'a')]);
  e.next(NOW);
  e.next(NOW);
  const boom = new Error('database down');
  e.stepDone('a', { error: boom });
  assert.equal(e.next(NOW), { kind: 'fail', error: boom });
});

test('a halted driver plans nothing new and only waits for what is in flight', () => {
  const d = driver([llm('a'), llm('b', { after: ['a'] }), out('o', 'b')]);
  d.next(NOW);
  d.next(NOW);
  d.stepDone('a', { type: 'recorded', result: done('A') });
  assert.equal(d.next(NOW, true), { kind: 'reload' }, 'b is not started');
});

test.run();
