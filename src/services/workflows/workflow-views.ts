import { computeRequiredProviders, inputSchema } from '../../domain/graph/validate.ts';
import { toJson } from '../../domain/money.ts';
import type { WorkflowAccess } from '../../catalog/workflow-access.ts';

/** Public shapes of the spec's WorkflowListItem and WorkflowDetail, built from one WorkflowAccess. */

const ACCESS_LABELS = {
  owned: 'You own this workflow',
  purchased: 'Purchased: runs are covered by your purchase (compute only)',
  wallet: 'Billed to your wallet balance at run time',
  purchase_required: 'Purchase required: buy it on the web; it cannot be run or bought through the API',
} as const;

const PRICING_EXPLANATION =
  'Estimated price per run (creator price plus compute steps). ' +
  'The final charge is settled from the live quote at run start and may differ slightly; model token usage is billed as used.';

export function toListItem(a: WorkflowAccess) {
  const graph = a.row.shownVersion?.graph ?? { nodes: [] };
  return {
    id: a.row.id,
    name: a.row.name,
    description: a.row.description,
    ownerHandle: a.row.ownerHandle,
    serviceCode: a.row.serviceCode,
    runModel: a.row.runModel,
    displayedRunPriceUsd: a.displayedRunPriceUsd === null ? null : toJson(a.displayedRunPriceUsd),
    pricingExplanation: a.displayedRunPriceUsd === null ? null : PRICING_EXPLANATION,
    userAccess: a.userAccess,
    accessLabel: ACCESS_LABELS[a.userAccess],
    apiRunnableNow: a.apiRunnableNow,
    runsCount: a.row.runsCount,
    credentialMode: a.row.credentialMode,
    requiredProviders: computeRequiredProviders(graph),
  };
}

/** A nil UUID in the illustrative response shape: it stands for the id POST /runs will return. */
const EXAMPLE_RUN_ID = '00000000-0000-0000-0000-000000000000';

export function toDetail(a: WorkflowAccess, baseUrl: string) {
  const { runsCount: _omitted, ...item } = toListItem(a);
  const graph = a.row.shownVersion?.graph ?? { nodes: [] };
  const schema = inputSchema(graph);
  const runUrl = `${baseUrl}/runs/${EXAMPLE_RUN_ID}`;
  const exampleInputs: Record<string, unknown> = {};
  for (const f of schema) exampleInputs[f.nodeId] = exampleValue(f);
  const origin = new URL(baseUrl).origin;
  return {
    ...item,
    apiAccessAllowed: a.row.apiAccess,
    purchaseUrl: a.row.listing === 'public' ? `${origin}/marketplace/workflows/${a.row.id}` : null,
    versionId: a.row.shownVersion?.id ?? null,
    versionLabel: a.row.shownVersion?.label ?? null,
    pinnedVersionId: a.row.pinnedVersionId,
    activeVersionId: a.row.activeVersionId,
    updateAvailable: a.row.pinnedVersionId !== null && a.row.pinnedVersionId !== a.row.activeVersionId && a.row.activeVersionId !== null,
    inputCount: schema.length,
    inputSchema: schema,
    responseShape: {
      run: {
        id: EXAMPLE_RUN_ID,
        status: 'accepted',
        statusUrl: runUrl,
        eventsUrl: `${runUrl}/events`,
        streamUrl: `${runUrl}/stream`,
      },
    },
    exampleRequest: {
      method: 'POST',
      url: `${baseUrl}/runs`,
      body: { workflow: a.row.id, inputs: exampleInputs, idempotencyKey: 'a-unique-key-per-logical-run' },
    },
  };
}

function exampleValue(f: ReturnType<typeof inputSchema>[number]): unknown {
  if (f.defaultValue !== undefined) return f.type === 'number' ? Number(f.defaultValue) : f.defaultValue;
  switch (f.type) {
    case 'number':
      return 1;
    case 'url':
      return 'https://example.com';
    case 'dropdown':
      return f.options?.[0]?.value ?? '';
    case 'json':
      return {};
    case 'file':
      return { __workflowMedia: true, kind: 'image', url: 'https://example.com/image.png', mimeType: 'image/png', filename: 'image.png' };
    case 'password':
      return '<secret>';
    default:
      return f.placeholder ?? 'text';
  }
}
