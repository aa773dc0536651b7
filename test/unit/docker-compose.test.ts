import { readFileSync } from 'node:fs';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { parse } from 'yaml';

/**
 * docker-compose.yml cannot be started on these machines (no Docker engine), so its properties are held
 * here: current Temporal images with their schema set up by the admin tools, health checks and the
 * start order they gate (the worker after the API, which migrates), restart policies, an API-only
 * process beside a worker, no secret with a default, and named volumes only (docs/operations.md).
 */

interface Service {
  image?: string;
  build?: unknown;
  restart?: string;
  command?: string | string[];
  environment?: Record<string, string>;
  volumes?: string[];
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
}

const text = readFileSync('docker-compose.yml', 'utf8');
// Merge keys (`<<: *app`) as Docker Compose reads them.
const compose = parse(text, { merge: true }) as { services: Record<string, Service>; volumes: Record<string, unknown> };
const services = compose.services;
const service = (name: string): Service => {
  const found = services[name];
  assert.ok(found, `service ${name}`);
  return found!;
};
const dependsOn = (name: string, on: string) => service(name).depends_on?.[on]?.condition;
const LONG_RUNNING = ['postgres', 'temporal', 'temporal-ui', 'api', 'worker'];
const JOBS = ['temporal-schema', 'temporal-namespace'];

test('current Temporal images: the server with its schema set up by admin-tools, no auto-setup', () => {
  for (const [name, s] of Object.entries(services)) assert.not.match(s.image ?? '', 'auto-setup', `${name} uses the deprecated auto-setup image`);
  assert.match(service('temporal').image!, /^temporalio\/server:\d+\.\d+\.\d+$/);
  assert.match(service('temporal-schema').image!, /^temporalio\/admin-tools:\d+\.\d+\.\d+$/);
  assert.match(String(service('temporal-schema').command), 'update-schema');
  assert.is(dependsOn('temporal', 'temporal-schema'), 'service_completed_successfully');
  assert.match(String(service('temporal-namespace').command), 'namespace create --namespace default');
});

test('health checks gate the start: Temporal before the API, the API (its migrations) before the worker', () => {
  for (const name of ['postgres', 'temporal', 'api', 'worker']) assert.ok(service(name).healthcheck?.test.length, `${name} has a health check`);
  assert.is(dependsOn('temporal-schema', 'postgres'), 'service_healthy');
  assert.is(dependsOn('temporal-namespace', 'temporal'), 'service_healthy');
  assert.is(dependsOn('api', 'postgres'), 'service_healthy');
  assert.is(dependsOn('api', 'temporal-namespace'), 'service_completed_successfully');
  assert.is(dependsOn('worker', 'api'), 'service_healthy');
  assert.match(service('api').healthcheck!.test.join(' '), '/readyz');
});

test('every service has a restart policy: long-running ones come back, set-up jobs retry a few times', () => {
  for (const name of LONG_RUNNING) assert.is(service(name).restart, 'unless-stopped', name);
  for (const name of JOBS) assert.match(service(name).restart ?? '', /^on-failure:\d+$/, name);
});

test('an API-only process beside a worker process, both from the service image', () => {
  const api = service('api');
  const worker = service('worker');
  assert.is(api.environment?.TEMPORAL_WORKER, 'off');
  assert.is(api.environment?.ENGINE, 'temporal');
  assert.equal(worker.command, ['npm', 'run', 'worker']);
  assert.is(worker.environment?.ENGINE, 'temporal');
  for (const s of [api, worker]) assert.ok(s.build, 'built from the inline Dockerfile, not run from the host checkout');
  const dockerfile = String((api!.build as { dockerfile_inline?: unknown }).dockerfile_inline ?? '');
  assert.match(dockerfile, /^COPY \. \./m);
  assert.match(dockerfile, /^USER node$/m);
});

test('no secret is baked in: each is required from the environment, with a message', () => {
  const required = (value: string | undefined, name: string) => assert.match(value ?? '', new RegExp(`\\$\\{${name}:\\?[^}]+\\}`), name);
  for (const name of ['api', 'worker']) {
    const env = service(name).environment!;
    required(env.ENCRYPTION_KEY, 'ENCRYPTION_KEY');
    required(env.INTERNAL_API_TOKEN, 'INTERNAL_API_TOKEN');
    required(env.DATABASE_URL, 'POSTGRES_PASSWORD');
  }
  required(service('postgres').environment!.POSTGRES_PASSWORD, 'POSTGRES_PASSWORD');
  required(service('temporal').environment!.POSTGRES_PWD, 'POSTGRES_PASSWORD');
  // No default value for any variable (`${VAR:-…}` / `${VAR-…}`), and no literal key or token.
  assert.not.match(text, /\$\{[A-Z_]+:?-/);
  assert.not.match(text, /0{32}/);
});

test('named volumes only: nothing of the host is mounted', () => {
  for (const [name, s] of Object.entries(services)) {
    for (const volume of s.volumes ?? []) {
      const source = volume.split(':')[0]!;
      assert.ok(source in (compose.volumes ?? {}), `${name} mounts ${source}, which is not a named volume`);
    }
  }
  assert.ok(service('postgres').volumes?.some((v) => v.startsWith('pgdata:')));
  assert.ok(service('api').volumes?.some((v) => v.startsWith('appdata:')));
});

test.run();
