import { readFileSync } from 'node:fs';

/**
 * `npx tsx bench/heap-top.ts FILE.heapsnapshot [N]`: what holds an idle process's heap, from a V8 heap
 * snapshot (node --heapsnapshot-signal=SIGUSR2 …, then kill -USR2). Prints the N largest groups of
 * objects by self size — grouped by constructor for objects, by kind for code, strings and arrays — and
 * the largest single strings with their first characters (module sources, documents held as text).
 */

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[] }; node_count: number };
  nodes: number[];
  strings: string[];
}

const file = process.argv[2];
if (!file) {
  console.error('usage: heap-top.ts FILE.heapsnapshot [N]');
  process.exit(2);
}
const top = Number(process.argv[3] ?? 20);
const snap = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
const fields = snap.snapshot.meta.node_fields;
const types = snap.snapshot.meta.node_types[0];
const width = fields.length;
const [iType, iName, iSize] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));

const strings: { size: number; text: string }[] = [];
const groups = new Map<string, { bytes: number; count: number }>();
let total = 0;
for (let i = 0; i < snap.nodes.length; i += width) {
  const type = types[snap.nodes[i + iType!]!]!;
  const name = snap.strings[snap.nodes[i + iName!]!]!;
  const size = snap.nodes[i + iSize!]!;
  total += size;
  if (type === 'string' || type === 'concatenated string') strings.push({ size, text: name.slice(0, 70).replace(/\s+/g, ' ') });
  // Objects by constructor; everything else (strings, code, arrays, hidden) by its kind.
  const key = type === 'object' || type === 'closure' ? `${type} ${name.slice(0, 60)}` : type === 'native' ? `native ${name.slice(0, 40)}` : type;
  const g = groups.get(key) ?? { bytes: 0, count: 0 };
  g.bytes += size;
  g.count++;
  groups.set(key, g);
}

const mib = (n: number) => `${(n / 1024 / 1024).toFixed(2)} MiB`;
console.log(`total self size ${mib(total)}, ${snap.snapshot.node_count} objects`);
for (const [key, g] of [...groups].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, top)) {
  console.log(`${mib(g.bytes).padStart(11)}  ${String(g.count).padStart(8)}  ${key}`);
}
console.log('largest strings:');
for (const s of strings.sort((a, b) => b.size - a.size).slice(0, 10)) console.log(`${mib(s.size).padStart(11)}  ${JSON.stringify(s.text)}`);
