/**
 * The `Prefer` request header (RFC 7240): `token [= word] *(; parameter)`, comma-separated, several
 * headers joined with commas. Names are case-insensitive; a value may be a quoted string. When a
 * preference appears more than once only the first counts (RFC 7240 §2). Anything unparseable is
 * skipped, never an error: preferences are hints a server may ignore.
 */
export function parsePrefer(header: string | undefined): Map<string, string> {
  const prefs = new Map<string, string>();
  if (!header) return prefs;
  for (const item of splitOutsideQuotes(header, ',')) {
    const [first = ''] = splitOutsideQuotes(item, ';');
    const eq = first.indexOf('=');
    const name = (eq < 0 ? first : first.slice(0, eq)).trim().toLowerCase();
    if (!/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(name) || prefs.has(name)) continue;
    let value = eq < 0 ? '' : first.slice(eq + 1).trim();
    if (value.startsWith('"') && value.endsWith('"') && value.length >= 2) value = value.slice(1, -1).replace(/\\(.)/g, '$1');
    prefs.set(name, value);
  }
  return prefs;
}

/**
 * `wait=N` as whole seconds, capped at `max`; null when absent, zero or not delta-seconds (then the
 * preference is ignored and no Preference-Applied is sent).
 */
export function preferredWaitSeconds(header: string | undefined, max: number): number | null {
  const raw = parsePrefer(header).get('wait');
  if (raw === undefined || !/^\d{1,20}$/.test(raw)) return null;
  const seconds = Number(raw);
  return seconds > 0 ? Math.min(seconds, max) : null;
}

function splitOutsideQuotes(text: string, sep: string): string[] {
  const parts: string[] = [];
  let start = 0;
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted && c === '\\') i++;
    else if (c === '"') quoted = !quoted;
    else if (!quoted && c === sep) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts;
}
