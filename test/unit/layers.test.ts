import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { REPO_ROOT } from '../helpers/source-files.ts';

/**
 * The layers of docs/architecture.md, held by dependency-cruiser with tools/lint/dependency-cruiser.cjs:
 * no import runs from a lower layer to a higher one, and no module reaches itself through its imports.
 */

const CONFIG = join(REPO_ROOT, 'tools/lint/dependency-cruiser.cjs');
const DEPCRUISE = join(REPO_ROOT, 'node_modules/dependency-cruiser/bin/dependency-cruiser.mjs');

interface Violation {
  from: string;
  to: string;
  rule: { name: string };
}

async function violations(cwd: string): Promise<string[]> {
  const { stdout } = await promisify(execFile)(process.execPath, [DEPCRUISE, '--config', CONFIG, '--output-type', 'json', 'src', 'workflows'], {
    cwd,
    maxBuffer: 64 * 1024 * 1024,
  }).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }));
  const result = JSON.parse(stdout) as { summary: { violations: Violation[]; totalCruised: number } };
  assert.ok(result.summary.totalCruised > 0, 'dependency-cruiser read no module');
  return result.summary.violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`);
}

test('src/ and workflows/ import down their layers only, without a cycle', async () => {
  assert.equal(await violations(REPO_ROOT), []);
});

test('the rules refuse an arrow up, a cycle, an impure domain and code crossing into the workflow', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'layers-'));
  try {
    const files: Record<string, string> = {
      'src/domain/rule.ts': "import { helper } from '../runs/helper.ts';\nexport const rule = () => helper();\n",
      'src/runs/helper.ts': "import { rule } from '../domain/rule.ts';\nexport const helper = (): unknown => rule;\n",
      'src/sql/statement.ts': "import { helper } from '../runs/helper.ts';\nexport const text = String(helper);\n",
      'src/engine/temporal/activities.ts': 'export const activity = async (): Promise<number> => 1;\n',
      'workflows/workflow.ts':
        "import type * as typesOnly from '../src/engine/temporal/activities.ts';\nimport { activity } from '../src/engine/temporal/activities.ts';\n" +
        'export type A = typeof typesOnly;\nexport const run = activity;\n',
    };
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    const found = await violations(dir);
    for (const expected of [
      'no-circular: src/domain/rule.ts → src/runs/helper.ts',
      'domain-pure: src/domain/rule.ts → src/runs/helper.ts',
      'leaves-import-down: src/domain/rule.ts → src/runs/helper.ts',
      'statements-import-down: src/sql/statement.ts → src/runs/helper.ts',
      'workflow-activities-types-only: workflows/workflow.ts → src/engine/temporal/activities.ts',
    ]) {
      assert.ok(found.includes(expected), `expected «${expected}» among:\n${found.join('\n')}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
