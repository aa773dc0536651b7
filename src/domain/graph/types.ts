/**
 * The workflow graph language (docs/design/graph-language.md). Pure types shared by the catalog loader, the interpreter,
 * the activities and the Temporal workflow, so this file must stay free of Node-only imports.
 */

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export const INPUT_KINDS = [
  'input.text',
  'input.password',
  'input.number',
  'input.textarea',
  'input.url',
  'input.file',
  'input.json',
  'input.dropdown',
] as const;
export type InputKind = (typeof INPUT_KINDS)[number];

/** Nodes that do I/O or real work and are billed as one step each (docs/design/money.md). */
export const STEP_KINDS = ['text.template', 'llm.chat', 'json.parse', 'http.request'] as const;
export type StepKind = (typeof STEP_KINDS)[number];

export const NODE_KINDS = [...INPUT_KINDS, ...STEP_KINDS, 'delay', 'condition', 'output'] as const;
export type NodeKind = (typeof NODE_KINDS)[number];

export const PROVIDERS = ['openai', 'anthropic', 'google', 'azure_openai', 'vertex', 'openrouter'] as const;
export type Provider = (typeof PROVIDERS)[number];

export const CONDITION_OPS = ['equals', 'not_equals', 'contains', 'gt', 'gte', 'lt', 'lte', 'is_empty', 'not_empty'] as const;
export type ConditionOp = (typeof CONDITION_OPS)[number];

interface NodeBase {
  id: string;
  name?: string;
  after?: string[];
  when?: { node: string; is: boolean };
  integration?: { provider: string; name: string; makesChanges: boolean };
}

export interface InputNode extends NodeBase {
  kind: InputKind;
  description?: string;
  required?: boolean;
  placeholder?: string;
  defaultValue?: string;
  options?: { label: string; value: string }[];
}
export interface TemplateNode extends NodeBase {
  kind: 'text.template';
  template: string;
}
export interface LlmNode extends NodeBase {
  kind: 'llm.chat';
  provider: Provider;
  model: string;
  prompt: string;
  system?: string;
}
export interface DelayNode extends NodeBase {
  kind: 'delay';
  seconds: number;
}
export interface ConditionNode extends NodeBase {
  kind: 'condition';
  value: string;
  op: ConditionOp;
  operand?: JsonValue;
}
export interface JsonParseNode extends NodeBase {
  kind: 'json.parse';
  from: string;
}
export interface HttpNode extends NodeBase {
  kind: 'http.request';
  method?: string;
  url: string;
  headers?: Record<string, string>;
  body?: string;
}
export interface OutputNode extends NodeBase {
  kind: 'output';
  from: string;
  name?: string;
  type?: string;
}

export type GraphNode = InputNode | TemplateNode | LlmNode | DelayNode | ConditionNode | JsonParseNode | HttpNode | OutputNode;

export interface Graph {
  nodes: GraphNode[];
}

export type SkipReason = 'condition_false' | 'upstream_failed';

/** What the engine has recorded about a node that has finished. */
export type NodeResult = { status: 'completed'; value: JsonValue } | { status: 'failed'; reason: string } | { status: 'skipped'; reason: SkipReason };

export interface RunOutputField {
  nodeId: string;
  name: string;
  type: string;
  value: JsonValue;
}

export function isInputKind(kind: string): kind is InputKind {
  return (INPUT_KINDS as readonly string[]).includes(kind);
}
export function isStepKind(kind: string): kind is StepKind {
  return (STEP_KINDS as readonly string[]).includes(kind);
}

/** `input.text` → `text`: the WorkflowInputType published in inputSchema. */
export function inputType(kind: InputKind): string {
  return kind.slice('input.'.length);
}

export function displayName(node: GraphNode): string {
  return node.name ?? node.id;
}
