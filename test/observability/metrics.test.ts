import { readFileSync } from 'node:fs';
import { createClient } from 'graphql-sse';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp } from '../helpers/app.ts';
import { moved, scrape, sum, value } from '../helpers/metrics.ts';
import { startProviderStub } from '../helpers/provider-stub.ts';
import { W_DELAY, W_LLM, W_SUMMARY } from '../rest/e2e/helpers/catalog.ts';
import { openaiEnv, settle, sleep, withE2e, type E2e } from '../rest/e2e/helpers/harness.ts';
import { waitFor } from '../helpers/wait-for.ts';

/**
 * GET /metrics over real HTTP (docs/operations.md): scraped before and after real work — runs that
 * complete and fail at the provider, a live SSE stream, a rate-limited and a spend-capped POST /runs,
 * webhook deliveries — and every series asserted to have moved by exactly what that work did. The
 * exposition is parsed strictly (test/helpers/metrics.ts): every line, every family, every histogram.
 */

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;
const embedded = { name: 'embedded' as const, timeoutMs: 20_000 };

/** Opens GET /runs/{id}/stream and resolves once the snapshot arrived; `done` resolves when the server ends it. */
async function openStream(e: E2e, runId: string): Promise<{ done: Promise<string> }> {
  const res = await fetch(`${e.t.base}/runs/${runId}/stream`, { headers: { authorization: 'Bearer wr_test_bob' } });
  assert.is(res.status, 200);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  while (!text.includes('event: snapshot')) {
    const { value: chunk, done } = await reader.read();
    if (done) break;
    text += decoder.decode(chunk, { stream: true });
  }
  const done = (async () => {
    for (;;) {
      const { value: chunk, done: end } = await reader.read();
      if (end) return text;
      text += decoder.decode(chunk, { stream: true });
    }
  })();
  return { done };
}

test('GET /metrics needs no key, is valid Prometheus text, and every series moves by exactly what a demo workload did', async () => {
  const stub = await startProviderStub({ failWith: 500 });
  try {
    await withE2e(embedded, { env: { ...openaiEnv(stub), RUN_CAPACITY: '7' } }, async (e) => {
      const metricsUrl = `${e.t.url}/metrics`;
      const before = await scrape(metricsUrl);
      assert.match(before.contentType ?? '', /^text\/plain; version=0\.0\.4/);

      // A template run that completes, and an LLM run whose provider answers 500.
      const a = (await e.t.call('POST', '/runs', { body: { workflow: W_SUMMARY, inputs: { topic: 'owls' } } })).body.run.id;
      const b = (await e.t.call('POST', '/runs', { body: { workflow: W_LLM, inputs: {} } })).body.run.id;
      assert.is((await settle(e, a)).status, 'completed');
      const llmRun = await settle(e, b);

      // A live stream on a run with a 1 s delay: open while the run waits, gone once the run ended.
      const c = (await e.t.call('POST', '/runs', { body: { workflow: W_DELAY, inputs: {} } })).body.run.id;
      const stream = await openStream(e, c);
      const during = await scrape(metricsUrl);
      assert.is(moved(before, during, 'wr_sse_streams_open'), 1, 'one stream open');
      assert.match(await stream.done, /event: run\.completed/);
      assert.is((await settle(e, c)).status, 'completed');

      // Three requests fill wr_test_bob_slow's window (3 a minute; a 400 counts), the fourth is refused.
      for (let i = 0; i < 3; i++) {
        assert.is((await e.t.call('POST', '/runs', { key: 'wr_test_bob_slow', rawBody: '{', headers: { 'content-type': 'application/json' } })).status, 400);
      }
      assert.is((await e.t.call('POST', '/runs', { key: 'wr_test_bob_slow', body: { workflow: W_SUMMARY, inputs: { topic: 'x' } } })).status, 429);

      // The capped key's $0.50 a day: one run, whose reservation then fills the cap; the next is refused.
      const capped = await e.t.call('POST', '/runs', { key: 'wr_test_bob_capped', body: { workflow: W_SUMMARY, inputs: { topic: 'cap' } } });
      assert.is(capped.status, 202);
      assert.is((await settle(e, capped.body.run.id, 'wr_test_bob_capped')).status, 'completed');
      await e.t.deps.orm.em.fork().execute('update runs set cap_usd = 0.5 where id = ?', [capped.body.run.id]);
      assert.is((await e.t.call('POST', '/runs', { key: 'wr_test_bob_capped', body: { workflow: W_SUMMARY, inputs: { topic: 'cap 2' } } })).status, 402);

      // Four terminal runs of bob: four webhooks, each recorded as delivered.
      const after = await waitFor(
        'four webhook deliveries recorded',
        async () => {
          const s = await scrape(metricsUrl);
          return e.hooks.length >= 4 && moved(before, s, 'wr_webhook_deliveries_total', { result: 'delivered' }) >= 4 ? s : undefined;
        },
        15_000,
      );

      const m = (name: string, labels: Record<string, string> = {}) => moved(before, after, name, labels);
      assert.is(m('wr_runs_accepted_total'), 4);
      assert.is(m('wr_runs_started_total'), 4);
      assert.is(m('wr_runs_finished_total', { status: 'completed', outcome: 'completed' }), 3);
      const llmLabels = { status: llmRun.status, outcome: llmRun.outcome ?? 'none' };
      assert.is(m('wr_runs_finished_total', llmLabels), 1, `the LLM run, ${JSON.stringify(llmLabels)}`);
      assert.is(m('wr_runs_finished_total'), 4);
      // Template steps: 1 (summary) + 1 (the LLM run's intro) + 2 (delay run) + 1 (capped key).
      assert.is(m('wr_step_duration_seconds', { node_kind: 'text.template' }), 5);
      assert.is(m('wr_step_duration_seconds', { node_kind: 'llm.chat' }), 1);
      assert.ok(sum(after, 'wr_step_duration_seconds', { node_kind: 'llm.chat' }) > 0);
      assert.is(m('wr_provider_call_errors_total', { provider: 'openai', error_type: 'unavailable' }), 1);
      assert.is(m('wr_provider_call_errors_total'), 1);
      assert.is(m('wr_webhook_deliveries_total', { result: 'delivered' }), 4);
      assert.is(m('wr_webhook_deliveries_total'), 4, 'no failed attempts');
      assert.is(m('wr_webhook_delivery_lag_seconds'), 4);
      assert.ok(sum(after, 'wr_webhook_delivery_lag_seconds') > 0);
      assert.is(m('wr_requests_rate_limited_total', { limit: 'runs_per_minute' }), 1);
      assert.is(m('wr_requests_spend_capped_total'), 1);
      assert.is(value(after, 'wr_sse_streams_open'), value(before, 'wr_sse_streams_open'), 'the stream is counted closed');

      // Requests by route template, method and status; never a raw path or an id.
      const http = (route: string, method: string, status: string) =>
        m('http_server_request_duration_seconds', { http_route: route, http_request_method: method, http_response_status_code: status });
      assert.is(http('/v1/runs', 'POST', '202'), 4);
      assert.is(http('/v1/runs', 'POST', '400'), 3);
      assert.is(http('/v1/runs', 'POST', '429'), 1);
      assert.is(http('/v1/runs', 'POST', '402'), 1);
      assert.is(http('/v1/runs/{id}/stream', 'GET', '200'), 1);
      assert.ok(http('/v1/runs/{id}', 'GET', '200') >= 4, 'polls of the runs');
      assert.ok((value(after, 'http_server_request_duration_seconds', { http_route: '/metrics' }) ?? 0) >= 2, 'the scrapes themselves');
      for (const s of after.families.get('http_server_request_duration_seconds')!.samples) {
        assert.not.match(JSON.stringify(s.labels), UUID, 'no ids in labels');
      }

      // Deployment-wide queue gauges (read from the database at scrape time) and RUN_CAPACITY.
      assert.is(value(after, 'wr_runs_capacity'), 7);
      assert.is(value(after, 'wr_runs_in_flight'), 0);
      assert.is(value(after, 'wr_runs_queued'), 0);
      assert.is(value(after, 'wr_runs_oldest_queued_age_seconds'), 0);
      // The connection pool (PGlite: one connection) and Node's process metrics.
      assert.ok((value(after, 'db_client_connection_max') ?? 0) >= 1);
      assert.ok(value(after, 'db_client_connection_count', { db_client_connection_state: 'used' }) !== undefined);
      assert.ok(value(after, 'db_client_connection_pending_requests') !== undefined);
      assert.ok((value(after, 'process_cpu_user_seconds_total') ?? 0) > 0);
      assert.ok(value(after, 'nodejs_eventloop_lag_seconds') !== undefined);
      assert.ok(after.families.has('wr_graphql_subscriptions_open'));
    });
  } finally {
    await stub.close();
  }
});

test('the queue gauges count queued runs and the age of the oldest, deployment-wide from the database', async () => {
  // A NullEngine never admits: accepted runs stay queued.
  const t = await startTestApp();
  try {
    for (let i = 0; i < 3; i++) assert.is((await t.call('POST', '/runs', { body: { workflow: W_SUMMARY, inputs: { topic: `q${i}` } } })).status, 202);
    await sleep(1100);
    const s = await scrape(`${t.url}/metrics`);
    assert.is(value(s, 'wr_runs_queued'), 3);
    assert.is(value(s, 'wr_runs_in_flight'), 0);
    const age = value(s, 'wr_runs_oldest_queued_age_seconds')!;
    assert.ok(age >= 1 && age < 30, `oldest queued age ${age}`);
  } finally {
    await t.close();
  }
});

test('an open GraphQL runEvents subscription is counted while it is open', async () => {
  const t = await startTestApp();
  const client = createClient({
    url: `${t.url}/graphql/stream`,
    headers: { Authorization: 'Bearer test-internal-token-123456' },
    fetchFn: fetch,
    retryAttempts: 0,
  });
  try {
    const id = (await t.call('POST', '/runs', { body: { workflow: W_SUMMARY, inputs: { topic: 'sub' } } })).body.run.id as string;
    const before = await scrape(`${t.url}/metrics`);
    const iterator = client.iterate({ query: `subscription($id: ID!) { runEvents(runId: $id) { type sequence } }`, variables: { id } });
    const first = await iterator.next();
    assert.is((first.value as { data: { runEvents: { type: string } } }).data.runEvents.type, 'run.queued');
    const during = await scrape(`${t.url}/metrics`);
    assert.is(moved(before, during, 'wr_graphql_subscriptions_open'), 1);
    // The run is cancelled: the subscription delivers the terminal event and completes.
    assert.is((await t.call('POST', `/runs/${id}/cancel`)).status, 200);
    for await (const _ of { [Symbol.asyncIterator]: () => iterator }) {
      // drain to completion
    }
    const after = await waitFor(
      'the subscription counted closed',
      async () => {
        const s = await scrape(`${t.url}/metrics`);
        return moved(before, s, 'wr_graphql_subscriptions_open') === 0 ? s : undefined;
      },
      15_000,
    );
    assert.is(value(after, 'wr_graphql_subscriptions_open'), value(before, 'wr_graphql_subscriptions_open'));
  } finally {
    client.dispose();
    await t.close();
  }
});

test('METRICS_PORT serves /metrics on a port of its own, without a key, and not on the API port', async () => {
  const t = await startTestApp({ env: { METRICS_PORT: '0' } });
  try {
    const url = t.app.metricsUrl;
    assert.ok(url, 'the metrics server is listening');
    assert.is.not(new URL(url!).port, new URL(t.url).port);
    const s = await scrape(`${url}/metrics`);
    assert.ok(s.families.has('wr_runs_accepted_total'));
    const onApi = await fetch(`${t.url}/metrics`);
    assert.is(onApi.status, 404);
    assert.is(((await onApi.json()) as { error: { code: string } }).error.code, 'not_found');
    assert.is((await fetch(`${url}/v1/workflows`)).status, 404, 'the metrics port serves nothing else');
  } finally {
    await t.close();
  }
  const closed = await fetch(`${t.app.metricsUrl}/metrics`).then(
    () => 'answered',
    () => 'refused',
  );
  assert.is(closed, 'refused', 'closed with the app');
});

test('the Grafana dashboard is a Grafana JSON model over a Prometheus datasource variable, and every query names a series /metrics exposes', async () => {
  const dash = JSON.parse(readFileSync('docs/ops/grafana-dashboard.json', 'utf8'));
  assert.type(dash.title, 'string');
  assert.type(dash.schemaVersion, 'number');
  const ds = dash.templating.list.find((v: any) => v.type === 'datasource');
  assert.is(ds?.query, 'prometheus');
  const t = await startTestApp();
  try {
    const live = await scrape(`${t.url}/metrics`);
    const exposed = new Set<string>();
    for (const [name, f] of live.families) {
      exposed.add(name);
      if (f.type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) exposed.add(name + suffix);
    }
    const panels = (dash.panels as any[]).flatMap((p) => (p.type === 'row' ? (p.panels ?? []) : [p]));
    assert.ok(panels.length >= 10);
    const used = new Set<string>();
    for (const p of panels) {
      assert.is(p.datasource?.uid, '${datasource}', `panel "${p.title}" uses the datasource variable`);
      assert.ok(p.targets?.length, `panel "${p.title}" has queries`);
      for (const target of p.targets) {
        // Every selector names its series followed by its label matchers (`name{job=~"$job"}`).
        const names = [...(target.expr as string).matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)\{/g)].map((x) => x[1]!);
        assert.ok(names.length, `"${p.title}" queries a series: ${target.expr}`);
        for (const n of names) {
          assert.ok(exposed.has(n), `"${p.title}" queries ${n}, which /metrics does not expose`);
          const base = n.replace(/_(bucket|sum|count)$/, '');
          used.add(live.families.get(base)?.type === 'histogram' ? base : n);
        }
      }
    }
    // Every series of the service has a panel.
    for (const name of live.families.keys()) {
      if (/^(wr|http_server|db_client)_/.test(name)) assert.ok(used.has(name) || used.has(name.replace(/_total$/, '')), `no panel shows ${name}`);
    }
  } finally {
    await t.close();
  }
});

test.run();
