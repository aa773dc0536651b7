/**
 * Scrapes a Prometheus endpoint over real HTTP and parses the text exposition format strictly: every
 * line must be a HELP, a TYPE or a sample line (name, optional labels with escaped values, a float),
 * every sample must belong to a family declared by TYPE, and a histogram needs its _bucket (with an
 * le="+Inf" one), _sum and _count per label set. prom-client writes NaN as `Nan` (the event-loop lag
 * before its first sample); Prometheus parses floats case-insensitively and takes it. (parse-prometheus-text-format was tried: it drops
 * the labels of histograms whose `le` is not the last label, as prom-client writes them.)
 */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: string;
  help: string;
  samples: Sample[];
}

export interface Scrape {
  text: string;
  families: Map<string, Family>;
  contentType: string | null;
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const LABEL = `([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\\\\n]|\\\\[\\\\"n])*)"`;
const SAMPLE = new RegExp(`^(${NAME})(?:\\{((?:${LABEL})(?:,${LABEL})*),?\\})? (-?[0-9.]+(?:e[+-]?[0-9]+)?|[+-]Inf|NaN|Nan)(?: -?\\d+)?$`);
const HELP = new RegExp(`^# HELP (${NAME}) (.*)$`);
const TYPE = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`);
const LABEL_G = new RegExp(LABEL, 'g');

export function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const helps = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    let m = HELP.exec(line);
    if (m) {
      helps.set(m[1]!, m[2]!);
      continue;
    }
    m = TYPE.exec(line);
    if (m) {
      if (families.has(m[1]!)) throw new Error(`TYPE given twice for ${m[1]}`);
      families.set(m[1]!, { name: m[1]!, type: m[2]!, help: helps.get(m[1]!) ?? '', samples: [] });
      continue;
    }
    m = SAMPLE.exec(line);
    if (!m) throw new Error(`not a line of the Prometheus text format: ${line}`);
    const name = m[1]!;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(LABEL_G)) labels[l[1]!] = l[2]!.replace(/\\n/g, '\n').replace(/\\(["\\])/g, '$1');
    const raw = m.at(-1)!;
    const value = raw === '+Inf' ? Infinity : raw === '-Inf' ? -Infinity : Number(raw);
    const family = families.get(name) ?? families.get(name.replace(/_(bucket|sum|count)$/, ''));
    if (!family) throw new Error(`sample without a TYPE: ${line}`);
    if (family.name !== name && family.type !== 'histogram' && family.type !== 'summary') throw new Error(`sample ${name} of ${family.type} ${family.name}`);
    family.samples.push({ name, labels, value });
  }
  for (const f of families.values()) {
    if (f.type !== 'histogram') continue;
    const key = (l: Record<string, string>) =>
      JSON.stringify(
        Object.entries(l)
          .filter(([k]) => k !== 'le')
          .sort(),
      );
    const sets = new Set(f.samples.map((s) => key(s.labels)));
    for (const set of sets) {
      const of = f.samples.filter((s) => key(s.labels) === set);
      const inf = of.find((s) => s.name === `${f.name}_bucket` && s.labels.le === '+Inf');
      const count = of.find((s) => s.name === `${f.name}_count`);
      if (!inf || !count || !of.some((s) => s.name === `${f.name}_sum`)) throw new Error(`histogram ${f.name}${set} lacks +Inf, _sum or _count`);
      if (inf.value !== count.value) throw new Error(`histogram ${f.name}${set}: +Inf bucket ${inf.value} != count ${count.value}`);
    }
  }
  return families;
}

export async function scrape(url: string, headers: Record<string, string> = {}): Promise<Scrape> {
  const res = await fetch(url, { headers });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status} ${text.slice(0, 200)}`);
  return { text, families: parseExposition(text), contentType: res.headers.get('content-type') };
}

const matches = (labels: Record<string, string>, want: Record<string, string>) => Object.entries(want).every(([k, v]) => (labels[k] ?? '') === v);

function total(s: Scrape, name: string, sampleName: string, labels: Record<string, string>): number | undefined {
  const f = s.families.get(name);
  if (!f) return undefined;
  return f.samples.filter((x) => x.name === sampleName && matches(x.labels, labels)).reduce((n, x) => n + x.value, 0);
}

/** The sum over the samples matching `labels` (a histogram's count), or undefined when the family is absent. */
export function value(s: Scrape, name: string, labels: Record<string, string> = {}): number | undefined {
  const f = s.families.get(name);
  return total(s, name, f?.type === 'histogram' ? `${name}_count` : name, labels);
}

/** A histogram's sum over the samples matching `labels`. */
export function sum(s: Scrape, name: string, labels: Record<string, string> = {}): number {
  return total(s, name, `${name}_sum`, labels) ?? 0;
}

/** How much a series moved between two scrapes (absent before counts as 0). */
export function moved(before: Scrape, after: Scrape, name: string, labels: Record<string, string> = {}): number {
  return (value(after, name, labels) ?? NaN) - (value(before, name, labels) ?? 0);
}
