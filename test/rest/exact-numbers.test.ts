import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from '../helpers/app.ts';

/**
 * POST /runs: an input number that a double cannot hold exactly is refused with 400 `invalid_inputs`
 * naming the input (docs/design/rules.md, "Numbers in inputs"), instead of being stored as null or as
 * another number; exact numbers are stored as sent.
 */

const W_TYPED = 'aaaaaaaa-0000-4000-8000-000000000002';

const t = suite<{ t: TestApp }>('POST /runs: exact numbers');
t.before(async (ctx) => {
  ctx.t = await startTestApp();
});
t.after(async (ctx) => ctx.t.close());

const runs = async (t: TestApp) => Number((await t.deps.orm.em.fork().execute<{ n: number }[]>('select count(*)::int as n from runs'))[0]!.n);

const post = (t: TestApp, inputsJson: string) =>
  t.call('POST', '/runs', { rawBody: `{"workflow": "${W_TYPED}", "inputs": ${inputsJson}}`, headers: { 'content-type': 'application/json' } });

t('a number input or a number inside a json input that a double cannot hold is 400 invalid_inputs naming the input', async ({ t }) => {
  const before = await runs(t);
  const cases: [string, string, string][] = [
    ['{"n": 1e400}', 'n', '1e400'],
    ['{"n": -1e400}', 'n', '-1e400'],
    ['{"n": 123456789012345678901234567890}', 'n', '123456789012345678901234567890'],
    ['{"Amount": 0.10000000000000001}', 'Amount', '0.10000000000000001'],
    ['{"n": 1, "data": {"deep": [1, 2, 1e400]}}', 'data', '1e400'],
    ['{"n": 1, "Data": 9007199254740993}', 'Data', '9007199254740993'],
    ['{"n": 1, "data": "{\\"x\\": 123456789012345678901234567890}"}', 'data', '123456789012345678901234567890'],
  ];
  for (const [inputs, input, number] of cases) {
    const res = await post(t, inputs);
    assert.is(res.status, 400, `${inputs}: ${res.text}`);
    assert.is(res.body.error.code, 'invalid_inputs', res.text);
    assert.is(res.body.error.details.length, 1, res.text);
    assert.is(res.body.error.details[0].input, input, res.text);
    assert.match(res.body.error.details[0].message, number);
  }
  assert.is(await runs(t), before, 'nothing was accepted');
});

t('exact numbers, however written, are accepted and stored as their value', async ({ t }) => {
  const res = await post(t, '{"n": 1.50e1, "data": {"big": 1e300, "tiny": 5e-324, "neg": -0, "id": 9007199254740991, "text": "1e400"}}');
  assert.is(res.status, 202, res.text);
  const [row] = await t.deps.orm.em.fork().execute<{ inputs: Record<string, unknown> }[]>('select inputs from runs where id = ?', [res.body.run.id]);
  assert.is(row!.inputs.n, 15);
  assert.equal(row!.inputs.data, { big: 1e300, tiny: 5e-324, neg: 0, id: 9007199254740991, text: '1e400' });
});

t.run();
