import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ConfigError, DEMO_CATALOG_FILE, loadConfig } from '../../src/config/config.ts';

const fails = (env: Record<string, string>, variable: string) => {
  try {
    loadConfig(env);
  } catch (err) {
    assert.instance(err, ConfigError);
    assert.match((err as Error).message, variable);
    return;
  }
  assert.unreachable(`expected ${variable} to be rejected`);
};

test('defaults match the contract when nothing is set', () => {
  const c = loadConfig({});
  assert.is(c.port, 8080);
  assert.is(c.host, '127.0.0.1');
  assert.is(c.engine, 'embedded');
  assert.is(c.dataDir, '.data');
  assert.is(c.runCapacity, 16);
  assert.is(c.queueMaxWaitSeconds, 900);
  assert.is(c.computeLimitUsd, '5');
  assert.is(c.sseHeartbeatMs, 15000);
  assert.is(c.catalogFile, DEMO_CATALOG_FILE);
  assert.equal(c.temporal, {
    address: 'localhost:7233',
    namespace: 'default',
    taskQueue: 'workflow-runs',
    worker: true,
    cli: undefined,
    connect: { attempts: 30, intervalMs: 2000 },
  });
  assert.is(loadConfig({ TEMPORAL_WORKER: 'off' }).temporal.worker, false, 'TEMPORAL_WORKER=off makes an API-only process');
  assert.is(c.webhookAllowInsecure, false);
  assert.is(c.allowPrivateNetwork, false);
  assert.is(c.preparedStatements, true);
});

test('DATABASE_PREPARED_STATEMENTS is on unless set to 0 or false, and rejects anything else', () => {
  assert.is(loadConfig({ DATABASE_PREPARED_STATEMENTS: '1' }).preparedStatements, true);
  assert.is(loadConfig({ DATABASE_PREPARED_STATEMENTS: '0' }).preparedStatements, false);
  assert.is(loadConfig({ DATABASE_PREPARED_STATEMENTS: 'false' }).preparedStatements, false);
  fails({ DATABASE_PREPARED_STATEMENTS: 'off' }, 'DATABASE_PREPARED_STATEMENTS');
});

test('an unset internal token is generated, never a fixed default', () => {
  const a = loadConfig({});
  const b = loadConfig({});
  assert.ok(a.internalApiTokenGenerated);
  assert.ok(a.internalApiToken.length >= 24);
  assert.is.not(a.internalApiToken, b.internalApiToken);
  assert.is(loadConfig({ INTERNAL_API_TOKEN: 'x'.repeat(20) }).internalApiTokenGenerated, false);
});

test('CATALOG_FILE=none loads nothing and a path is kept as given', () => {
  assert.is(loadConfig({ CATALOG_FILE: 'none' }).catalogFile, null);
  assert.is(loadConfig({ CATALOG_FILE: '/tmp/c.yaml' }).catalogFile, '/tmp/c.yaml');
});

test('each bad variable fails the start with its name in the message', () => {
  fails({ PORT: 'eighty' }, 'PORT');
  fails({ PORT: '70000' }, 'PORT');
  fails({ ENGINE: 'kafka' }, 'ENGINE');
  fails({ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL');
  fails({ RUN_CAPACITY: '0' }, 'RUN_CAPACITY');
  fails({ COMPUTE_LIMIT_USD: '1.1234567' }, 'COMPUTE_LIMIT_USD');
  fails({ PUBLIC_BASE_URL: 'not a url' }, 'PUBLIC_BASE_URL');
  fails({ INTERNAL_API_TOKEN: 'short' }, 'INTERNAL_API_TOKEN');
  fails({ WEBHOOK_ALLOW_INSECURE: 'maybe' }, 'WEBHOOK_ALLOW_INSECURE');
});

test('an empty variable counts as unset', () => {
  assert.is(loadConfig({ PORT: '' }).port, 8080);
});

test('PUBLIC_BASE_URL loses its trailing slash', () => {
  assert.is(loadConfig({ PUBLIC_BASE_URL: 'https://api.example.com/v1/' }).publicBaseUrl, 'https://api.example.com/v1');
});

test('metrics are on by default on the API port; METRICS, METRICS_PORT and TEMPORAL_METRICS_ADDRESS are checked', () => {
  assert.equal(loadConfig({}).metrics, { enabled: true, port: undefined, temporalAddress: undefined });
  assert.equal(loadConfig({ METRICS: 'off', METRICS_PORT: '9464', TEMPORAL_METRICS_ADDRESS: '0.0.0.0:9465' }).metrics, {
    enabled: false,
    port: 9464,
    temporalAddress: '0.0.0.0:9465',
  });
  assert.is(loadConfig({ TEMPORAL_METRICS_ADDRESS: '[::1]:9465' }).metrics.temporalAddress, '[::1]:9465');
  fails({ METRICS: 'maybe' }, 'METRICS');
  fails({ METRICS_PORT: '70000' }, 'METRICS_PORT');
  fails({ TEMPORAL_METRICS_ADDRESS: '9465' }, 'TEMPORAL_METRICS_ADDRESS');
  fails({ TEMPORAL_METRICS_ADDRESS: 'http://host:9465' }, 'TEMPORAL_METRICS_ADDRESS');
});

test.run();
