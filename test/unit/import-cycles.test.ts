import { readFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { REPO_ROOT, serviceSources } from '../helpers/source-files.ts';

/**
 * No module of src/ or workflows/ reaches itself through its imports, type-only imports included: a cycle
 * makes a module's meaning depend on load order and keeps layers from being read one at a time.
 */

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+['"](\.{1,2}\/[^'"]+)['"]/g;

function importGraph(files: string[]): Map<string, string[]> {
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    const targets = [...text.matchAll(IMPORT)].map((match) => resolve(dirname(file), match[1]!)).filter((target) => known.has(target));
    graph.set(file, targets);
  }
  return graph;
}

/** One cycle per strongly connected part of the graph that has one, as a list of files. */
function findCycles(graph: Map<string, string[]>): string[][] {
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const cycles: string[][] = [];
  const visit = (file: string): void => {
    state.set(file, 'open');
    path.push(file);
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === 'open') cycles.push(path.slice(path.indexOf(next)));
      else if (!state.has(next)) visit(next);
    }
    path.pop();
    state.set(file, 'done');
  };
  for (const file of graph.keys()) if (!state.has(file)) visit(file);
  return cycles;
}

test('no import cycle under src/ and workflows/', () => {
  const files = serviceSources();
  assert.ok(files.length > 100, `found only ${files.length} source files`);
  const cycles = findCycles(importGraph(files)).map((cycle) => cycle.map((file) => relative(REPO_ROOT, file)).join(' → '));
  assert.equal(cycles, []);
});

test('the cycle finder sees a cycle through a type-only import', () => {
  const graph = new Map([
    ['a.ts', ['b.ts']],
    ['b.ts', ['c.ts']],
    ['c.ts', ['a.ts']],
    ['d.ts', ['a.ts']],
  ]);
  assert.equal(findCycles(graph), [['a.ts', 'b.ts', 'c.ts']]);
  const text = "import type { Em } from '../db/orm.ts';\nexport { x } from './x.ts';\nimport pg from 'pg';";
  assert.equal([...text.matchAll(IMPORT)].map((match) => match[1]), ['../db/orm.ts', './x.ts']);
});

test.run();
