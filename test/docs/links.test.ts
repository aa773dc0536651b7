import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { REPO_ROOT, sourceFiles } from '../helpers/source-files.ts';

/**
 * Every link a reader can follow resolves: relative links in the README and the Markdown under docs/,
 * src/ and workflows/ name a file that exists and, with `#anchor`, a heading of it; a source comment
 * that points at `docs/….md#anchor` names a heading too. Anchors are GitHub's: the heading in lower
 * case, punctuation dropped, spaces as hyphens, a repeated heading numbered `-1`, `-2`, ….
 */

function markdownFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : markdownFiles(path);
    return entry.name.endsWith('.md') ? [path] : [];
  });
}

/** GitHub's anchor of a heading's text: lower case, a link as its text, punctuation dropped, each space a hyphen. */
function githubSlug(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/`/g, '')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

const anchorsOf = new Map<string, Set<string>>();
function anchors(file: string): Set<string> {
  let found = anchorsOf.get(file);
  if (found) return found;
  found = new Set();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    const heading = !fenced && /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const slug = githubSlug(heading[1]!);
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    found.add(count === 0 ? slug : `${slug}-${count}`);
  }
  anchorsOf.set(file, found);
  return found;
}

function brokenAnchor(file: string, anchor: string): string | null {
  return anchors(file).has(anchor.toLowerCase()) ? null : `no heading #${anchor}`;
}

test('relative links in the README and docs resolve, anchors included', () => {
  const files = [join(REPO_ROOT, 'README.md'), ...['docs', 'src', 'workflows'].flatMap((dir) => markdownFiles(join(REPO_ROOT, dir)))];
  const problems: string[] = [];
  for (const file of files) {
    let fenced = false;
    readFileSync(file, 'utf8')
      .split('\n')
      .forEach((line, index) => {
        if (/^\s*```/.test(line)) fenced = !fenced;
        if (fenced) return;
        // Inline links and images, `[text](target)`, and reference definitions, `[label]: target`.
        const targets = [...line.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g), ...line.matchAll(/^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?/g)].map((m) => m[1]!);
        for (const target of targets) {
          if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, mailto:, …
          const where = `${relative(REPO_ROOT, file)}:${index + 1} → ${target}`;
          const [path, anchor] = target.split('#') as [string, string | undefined];
          const linked = path === '' ? file : join(dirname(file), decodeURIComponent(path));
          if (!existsSync(linked)) problems.push(`${where}: no such file`);
          else if (anchor && linked.endsWith('.md')) {
            const problem = brokenAnchor(linked, anchor);
            if (problem) problems.push(`${where}: ${problem}`);
          }
        }
      });
  }
  assert.ok(files.length > 10, `only ${files.length} Markdown files found`);
  assert.equal(problems, []);
});

test('source comments that point at docs/….md#anchor name a heading that exists', () => {
  const sources = ['src', 'workflows', 'test', 'bench'].flatMap((dir) => sourceFiles(join(REPO_ROOT, dir)));
  const problems: string[] = [];
  let checked = 0;
  for (const file of sources) {
    readFileSync(file, 'utf8')
      .split('\n')
      .forEach((line, index) => {
        for (const ref of line.matchAll(/\b(docs\/[\w./-]+\.md)(?:#([\w-]+))?/g)) {
          checked += 1;
          const target = join(REPO_ROOT, ref[1]!);
          const where = `${relative(REPO_ROOT, file)}:${index + 1} → ${ref[0]}`;
          if (!existsSync(target)) problems.push(`${where}: no such file`);
          else if (ref[2]) {
            const problem = brokenAnchor(target, ref[2]);
            if (problem) problems.push(`${where}: ${problem}`);
          }
        }
      });
  }
  assert.ok(checked > 20, `only ${checked} references to docs/ found in the sources`);
  assert.equal(problems, []);
});

test('the anchor rule is GitHub’s', () => {
  const file = join(REPO_ROOT, 'docs', 'architecture.md');
  assert.ok(anchors(file).has('layers'));
  assert.ok(anchors(file).has('a-rest-request'));
  assert.is(brokenAnchor(file, 'no-such-heading'), 'no heading #no-such-heading');
  assert.is(githubSlug('A run’s money: `finish_runs` — once'), 'a-runs-money-finish_runs--once');
  assert.is(githubSlug('See [the spec](spec.md) & more'), 'see-the-spec--more');
});

/** The Markdown files a reader opens (the README, docs/, src/, workflows/) and the service's, tests' and benches' sources. */
function readable(): string[] {
  return [
    join(REPO_ROOT, 'README.md'),
    ...['docs', 'src', 'workflows'].flatMap((dir) => markdownFiles(join(REPO_ROOT, dir))),
    ...['src', 'workflows', 'test', 'bench'].flatMap((dir) => sourceFiles(join(REPO_ROOT, dir))),
  ].filter((file) => !relative(REPO_ROOT, file).startsWith('src/client/'));
}

/** Lines a reader reads as prose: all of a Markdown file, the comment lines of a source file. */
function proseLines(file: string): [line: string, index: number][] {
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .map((line, index): [string, number] => [line, index]);
  return file.endsWith('.md') ? lines : lines.filter(([line]) => /^\s*(\*|\/\/|\/\*)/.test(line));
}

test('a file named in the docs or in a source comment exists (a moved file leaves no stale path)', () => {
  const problems: string[] = [];
  let checked = 0;
  for (const file of readable()) {
    for (const [line, index] of proseLines(file)) {
      for (const ref of line.matchAll(/(?<![\w./-])((?:src|workflows|test|bench)\/[\w./-]*\w\.ts)\b/g)) {
        checked += 1;
        if (!existsSync(join(REPO_ROOT, ref[1]!))) problems.push(`${relative(REPO_ROOT, file)}:${index + 1} → ${ref[1]}: no such file`);
      }
    }
  }
  assert.ok(checked > 100, `only ${checked} file names found`);
  assert.equal(problems, []);
});

test('the docs and the sources cite no issue: a decision is stated in its own words', () => {
  const problems: string[] = [];
  for (const file of readable()) {
    for (const [line, index] of proseLines(file)) {
      const citesIssue = /\b(issue|ticket)s?\s*#?\d+|\bthe issue (asked|said|wants)|#\d+\b(?![\w-])(?=.*\b(issue|PR)\b)/i.test(line);
      if (citesIssue) problems.push(`${relative(REPO_ROOT, file)}:${index + 1}`);
    }
  }
  assert.equal(problems, []);
});

test.run();
