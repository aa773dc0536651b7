/**
 * The layers of docs/architecture.md#layers, held by dependency-cruiser: a module imports only from
 * its own layer or the layers below it, and no import cycle anywhere under src/ or workflows/.
 * Each layer is a list of path patterns (regular expressions from the repository root), top first.
 */
const LAYERS = [
  { name: 'entry points', paths: ['^src/(app|main|worker|drain|temporal-dev)\\.ts$', '^src/build/', '^src/catalog/cli\\.ts$', '^src/graphql/print-schema\\.ts$'] },
  { name: 'adapters', paths: ['^src/http/rest/', '^src/graphql/', '^src/http/docs/', '^src/http/(health|metrics-server)\\.ts$'] },
  { name: 'http plumbing', paths: ['^src/http/[^/]+\\.ts$'] },
  { name: 'engines and services', paths: ['^src/engine/', '^src/services/'] },
  { name: 'the Temporal workflow', paths: ['^workflows/'] },
  { name: 'runs', paths: ['^src/runs/'] },
  { name: 'billing', paths: ['^src/billing/'] },
  { name: 'catalog', paths: ['^src/catalog/'] },
  { name: 'statements', paths: ['^src/sql/'] },
  { name: 'database', paths: ['^src/db/'] },
  { name: 'observability', paths: ['^src/observability/'] },
  { name: 'leaves', paths: ['^src/(domain|config|security)/', '^src/logger\\.ts$'] },
];

/** The one import that crosses a layer upwards and leaves no code: the workflow's view of its activities' types. */
const ACTIVITY_TYPES = '^src/engine/temporal/activities\\.ts$';

const arrowsDown = LAYERS.slice(1).map((layer, i) => {
  const above = LAYERS.slice(0, i + 1).flatMap((higher) => higher.paths);
  return {
    name: `${layer.name.replaceAll(' ', '-')}-import-down`,
    comment: `${layer.name}: imports from its own layer and the layers below it only`,
    severity: 'error',
    from: { path: layer.paths, pathNot: above },
    to: { path: above, pathNot: layer.name === 'the Temporal workflow' ? [ACTIVITY_TYPES] : [] },
  };
});

/** Two parts of one layer that import nothing of each other. */
const apart = (name, comment, one, other) => [
  { name, comment, severity: 'error', from: { path: one }, to: { path: other } },
  { name, comment, severity: 'error', from: { path: other }, to: { path: one } },
];

module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'a cycle makes a module depend on load order', from: {}, to: { circular: true } },
    ...arrowsDown,
    ...apart('adapters-apart', 'REST and GraphQL share what is below them, never each other', '^src/http/rest/', '^src/graphql/'),
    ...apart('engines-and-services-apart', 'the engines and the services both call the runs module, never each other', '^src/engine/', '^src/services/'),
    {
      name: 'workflow-sandbox',
      comment:
        'the workflow bundle holds pure code only: the domain, and the types of its activities (a type import leaves no code)',
      severity: 'error',
      from: { path: '^workflows/' },
      to: {
        path: '^src/',
        pathNot: ['^src/domain/', ACTIVITY_TYPES],
      },
    },
    {
      name: 'workflow-activities-types-only',
      severity: 'error',
      from: { path: '^workflows/' },
      to: { path: ACTIVITY_TYPES, dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'domain-pure',
      comment: 'the domain is pure rules: it imports nothing else of this service',
      severity: 'error',
      from: { path: '^src/domain/' },
      to: { path: '^(src|workflows)/', pathNot: '^src/domain/' },
    },
  ],
  options: {
    includeOnly: '^(src|workflows)/',
    exclude: { path: ['^src/client/', 'node_modules'] },
    parser: 'swc',
    tsPreCompilationDeps: true,
    doNotFollow: { path: 'node_modules' },
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.json'] },
  },
};
