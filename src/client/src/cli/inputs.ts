import type { InputValue, WorkflowInputField } from '../types.ts';

/** A usage error of the CLI itself (reported on one line, exit code 2). */
export class UsageError extends Error {}

/**
 * `--input NAME=VALUE` pairs to the `inputs` object, typed by the workflow's input schema: `number`
 * inputs become JSON numbers, `json` and `file` inputs are parsed as JSON, everything else stays a
 * string. NAME is a nodeId or an exact name; names the schema does not know are sent as they are, so
 * the service reports them (400 `invalid_inputs` with details).
 */
export function parseInputs(pairs: string[], schema: WorkflowInputField[]): Record<string, InputValue> {
  const inputs: Record<string, InputValue> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new UsageError(`--input expects NAME=VALUE, got "${pair}"`);
    const name = pair.slice(0, eq);
    const raw = pair.slice(eq + 1);
    const field = schema.find((f) => f.nodeId === name) ?? schema.find((f) => f.name === name);
    inputs[name] = typed(raw, field?.type);
  }
  return inputs;
}

function typed(raw: string, type: string | undefined): InputValue {
  if (type === 'number') {
    const n = Number(raw);
    return raw.trim() !== '' && Number.isFinite(n) ? n : raw;
  }
  if (type === 'json' || type === 'file') {
    try {
      return JSON.parse(raw) as InputValue;
    } catch {
      return raw;
    }
  }
  return raw;
}
