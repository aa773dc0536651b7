import dns from 'node:dns';
import net from 'node:net';

/**
 * SSRF guard for outbound requests made on behalf of workflow graphs (`http.request` nodes, media URLs).
 *
 * Two layers:
 * - `assertPublicUrl` checks a URL before the request: the scheme, a literal IP in the host (in any
 *   notation WHATWG URL parsing normalises: `2130706433`, `0x7f.1`, `[::ffff:7f00:1]`, …) or every
 *   address its name resolves to.
 * - `guardedLookup` is a drop-in `lookup` for `net.connect` / an undici Agent's `connect.lookup`, so the
 *   address actually connected to is checked too. That closes the DNS-rebinding gap between the pre-check
 *   and the connection (a name that resolves to a public address first and to 127.0.0.1 next).
 *
 * Both fail with `BlockedAddressError`, whose message is safe to show to the buyer.
 */

export class BlockedAddressError extends Error {
  readonly code = 'blocked_address';
  constructor(message = 'the URL points to a private or reserved network address, which is not allowed') {
    super(message);
    this.name = 'BlockedAddressError';
  }
}

/** The host name did not resolve (buyer-safe message). */
export class HostLookupError extends Error {
  readonly code = 'host_lookup_failed';
  constructor(message = 'the host name of the URL could not be resolved') {
    super(message);
    this.name = 'HostLookupError';
  }
}

export interface LookupAddress {
  address: string;
  family: number;
}

export interface NetGuardOptions {
  allowPrivateNetwork: boolean;
  /** Resolver override (tests); defaults to `dns.promises.lookup(host, { all: true })`. */
  lookup?: (hostname: string) => Promise<LookupAddress[]>;
}

// ---------------------------------------------------------------------------------------------------
// Address classification

type V4Range = readonly [base: number, bits: number];
type V6Range = readonly [base: bigint, bits: number];

function v4(text: string): number {
  const p = text.split('.').map(Number);
  return (((p[0] << 24) >>> 0) + (p[1] << 16) + (p[2] << 8) + p[3]) >>> 0;
}

/** IPv4 ranges that are not the public internet (RFC 6890 special-purpose registry, plus multicast). */
const BLOCKED_V4: readonly V4Range[] = [
  [v4('0.0.0.0'), 8], // "this network", includes the unspecified 0.0.0.0
  [v4('10.0.0.0'), 8], // private
  [v4('100.64.0.0'), 10], // carrier-grade NAT (includes Alibaba's 100.100.100.200 metadata)
  [v4('127.0.0.0'), 8], // loopback
  [v4('169.254.0.0'), 16], // link-local (includes 169.254.169.254 cloud metadata)
  [v4('172.16.0.0'), 12], // private
  [v4('192.0.0.0'), 24], // IETF protocol assignments (includes 192.0.0.192 Oracle metadata)
  [v4('192.0.2.0'), 24], // TEST-NET-1
  [v4('192.88.99.0'), 24], // 6to4 relay anycast
  [v4('192.168.0.0'), 16], // private
  [v4('198.18.0.0'), 15], // benchmarking
  [v4('198.51.100.0'), 24], // TEST-NET-2
  [v4('203.0.113.0'), 24], // TEST-NET-3
  [v4('224.0.0.0'), 4], // multicast
  [v4('240.0.0.0'), 4], // reserved, includes broadcast 255.255.255.255
];

function inV4(addr: number, [base, bits]: V4Range): boolean {
  if (bits === 0) return true;
  const mask = (0xffffffff << (32 - bits)) >>> 0;
  return (addr & mask) >>> 0 === (base & mask) >>> 0;
}

function parseV6(text: string): bigint {
  let s = text;
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  // A trailing dotted quad (::ffff:1.2.3.4) becomes two hextets.
  const lastColon = s.lastIndexOf(':');
  const tail = s.slice(lastColon + 1);
  if (tail.includes('.')) {
    const n = v4(tail);
    s = `${s.slice(0, lastColon + 1)}${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const halves = s.split('::');
  const head = halves[0] ? halves[0].split(':') : [];
  const rest = halves.length > 1 && halves[1] ? halves[1].split(':') : [];
  const missing = 8 - head.length - rest.length;
  const groups = [...head, ...Array<string>(halves.length > 1 ? missing : 0).fill('0'), ...rest];
  let value = 0n;
  for (const g of groups) value = (value << 16n) | BigInt(parseInt(g || '0', 16));
  return value;
}

function v6(text: string): bigint {
  return parseV6(text);
}

const BLOCKED_V6: readonly V6Range[] = [
  [v6('::'), 128], // unspecified
  [v6('::1'), 128], // loopback
  [v6('100::'), 64], // discard-only
  [v6('2001::'), 32], // Teredo (embeds an obfuscated IPv4 address)
  [v6('2001:db8::'), 32], // documentation
  [v6('64:ff9b:1::'), 48], // local-use NAT64
  [v6('fc00::'), 7], // unique local (includes AWS's fd00:ec2::254 metadata)
  [v6('fe80::'), 10], // link-local
  [v6('fec0::'), 10], // site-local (deprecated)
  [v6('ff00::'), 8], // multicast
];

function inV6(addr: bigint, [base, bits]: V6Range): boolean {
  const shift = BigInt(128 - bits);
  return addr >> shift === base >> shift;
}

function isBlockedV4(addr: number): boolean {
  return BLOCKED_V4.some((r) => inV4(addr, r));
}

function isBlockedV6(addr: bigint): boolean {
  if (BLOCKED_V6.some((r) => inV6(addr, r))) return true;
  const low32 = Number(addr & 0xffffffffn);
  // The deprecated IPv4-compatible block ::/96 is never a routable public destination.
  if (addr >> 32n === 0n) return true;
  // IPv4-mapped ::ffff:a.b.c.d, IPv4-translated ::ffff:0:a.b.c.d and the NAT64 well-known prefix
  // 64:ff9b::/96 reach the embedded IPv4 address: judge that one.
  if (addr >> 32n === 0xffffn || addr >> 32n === 0xffff0000n) return isBlockedV4(low32);
  if (addr >> 32n === v6('64:ff9b::') >> 32n) return isBlockedV4(low32);
  // 6to4 2002:V4ADDR::/48 tunnels to the embedded IPv4 address.
  if (addr >> 112n === 0x2002n) return isBlockedV4(Number((addr >> 80n) & 0xffffffffn));
  return false;
}

/**
 * Whether an IP literal (v4 or v6, brackets allowed) is a public unicast address. Anything that is not
 * a valid IP literal is not public.
 */
export function isPublicAddress(ip: string): boolean {
  const host = ip.startsWith('[') && ip.endsWith(']') ? ip.slice(1, -1) : ip;
  const bare = host.split('%')[0];
  const family = net.isIP(bare);
  if (family === 4) return !isBlockedV4(v4(bare));
  if (family === 6) return !isBlockedV6(parseV6(bare));
  return false;
}

// ---------------------------------------------------------------------------------------------------
// URL pre-check

async function defaultLookup(hostname: string): Promise<LookupAddress[]> {
  return dns.promises.lookup(hostname, { all: true, verbatim: true });
}

/** Parses an absolute http(s) URL or throws a buyer-safe `BlockedAddressError`. */
export function parseHttpUrl(url: string): URL {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new BlockedAddressError('the URL is not a valid absolute URL');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new BlockedAddressError('only http and https URLs are allowed');
  }
  return parsed;
}

/**
 * Throws `BlockedAddressError` unless `url` is an http(s) URL whose host is a public address or a name
 * whose every resolved address is public. With `allowPrivateNetwork` only the scheme is checked.
 * A name that does not resolve throws `HostLookupError`.
 */
export async function assertPublicUrl(url: string, opts: NetGuardOptions): Promise<void> {
  const parsed = parseHttpUrl(url);
  if (opts.allowPrivateNetwork) return;
  // WHATWG URL parsing has already normalised IPv4 in decimal/octal/hex/short forms to dotted quads
  // and IPv6 to its compressed form in brackets.
  const host = parsed.hostname.startsWith('[') ? parsed.hostname.slice(1, -1) : parsed.hostname;
  if (host === '') throw new BlockedAddressError('the URL has no host');
  if (net.isIP(host)) {
    if (!isPublicAddress(host)) throw new BlockedAddressError();
    return;
  }
  let addresses: LookupAddress[];
  try {
    addresses = await (opts.lookup ?? defaultLookup)(host);
  } catch {
    throw new HostLookupError();
  }
  if (addresses.length === 0) throw new HostLookupError();
  // Every address must be public: the connection may use any of them.
  if (addresses.some((a) => !isPublicAddress(a.address))) throw new BlockedAddressError();
}

// ---------------------------------------------------------------------------------------------------
// Connect-time check

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` with the signature `net.connect` (and so undici's `connect.lookup`) expects: resolves with
 * `dns.lookup` and fails the connection with `BlockedAddressError` when any resolved address is not
 * public. Honours `options.all` (Node's happy-eyeballs path asks for every address).
 */
export function guardedLookup(hostname: string, options: dns.LookupOptions | LookupCallback, callback?: LookupCallback): void {
  let opts: dns.LookupOptions = {};
  let cb: LookupCallback;
  if (typeof options === 'function') cb = options;
  else {
    opts = options ?? {};
    cb = callback!;
  }
  const wantAll = opts.all === true;
  dns.lookup(hostname, { ...opts, all: true }, (err, addresses) => {
    if (err) return cb(err, wantAll ? [] : '');
    const list = addresses as LookupAddress[];
    if (list.length === 0) {
      const e: NodeJS.ErrnoException = new HostLookupError();
      e.code = 'ENOTFOUND';
      return cb(e, wantAll ? [] : '');
    }
    if (list.some((a) => !isPublicAddress(a.address))) {
      return cb(new BlockedAddressError(), wantAll ? [] : '');
    }
    if (wantAll) cb(null, list);
    else cb(null, list[0].address, list[0].family);
  });
}
