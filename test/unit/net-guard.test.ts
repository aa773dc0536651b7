import type dns from 'node:dns';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { assertPublicUrl, BlockedAddressError, guardedLookup, HostLookupError, isPublicAddress, type LookupAddress } from '../../src/security/net-guard.ts';

/** A resolver that fails the test if it is asked anything: literal IPs must never need DNS. */
const noDns = async (host: string): Promise<LookupAddress[]> => {
  throw new Error(`unexpected DNS lookup of ${host}`);
};

async function outcome(url: string, opts: Parameters<typeof assertPublicUrl>[1]): Promise<'allowed' | string> {
  try {
    await assertPublicUrl(url, opts);
    return 'allowed';
  } catch (e) {
    return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  }
}

const BLOCKED_URLS = [
  // loopback, in the notations WHATWG URL parsing folds to 127.0.0.1
  'http://127.0.0.1/',
  'http://127.1.2.3:8080/x',
  'http://2130706433/',
  'http://0x7f.1/',
  'http://0x7f000001/',
  'http://017700000001/',
  'http://127.1/',
  'http://[::1]/',
  'http://[0:0:0:0:0:0:0:1]/',
  // IPv4-mapped / translated IPv6 of private addresses
  'http://[::ffff:127.0.0.1]/',
  'http://[::ffff:7f00:1]/',
  'http://[::ffff:10.1.2.3]/',
  'http://[::ffff:169.254.169.254]/',
  'http://[64:ff9b::a9fe:a9fe]/', // NAT64 of 169.254.169.254
  'http://[2002:c0a8:0101::1]/', // 6to4 of 192.168.1.1
  // private
  'http://10.0.0.1/',
  'http://172.16.0.1/',
  'http://172.31.255.255/',
  'http://192.168.0.10/',
  'http://[fc00::1]/',
  'http://[fd12:3456::1]/',
  // link-local and cloud metadata
  'http://169.254.169.254/latest/meta-data/',
  'http://[fe80::1]/',
  'http://[fd00:ec2::254]/',
  'http://100.100.100.200/', // Alibaba metadata, inside CGNAT
  'http://192.0.0.192/', // Oracle metadata
  // CGNAT, this-network, unspecified, multicast, reserved, broadcast
  'http://100.64.0.1/',
  'http://100.127.255.254/',
  'http://0.0.0.0/',
  'http://0/',
  'http://0.1.2.3/',
  'http://[::]/',
  'http://224.0.0.1/',
  'http://239.255.255.250/',
  'http://[ff02::1]/',
  'http://240.0.0.1/',
  'http://255.255.255.255/',
  'https://198.18.0.1/',
];

const ALLOWED_URLS = [
  'http://93.184.216.34/',
  'https://8.8.8.8/dns-query',
  'http://1.1.1.1:8443/',
  'http://172.15.255.255/', // just below 172.16/12
  'http://172.32.0.1/', // just above it
  'http://100.63.255.255/', // just below CGNAT
  'http://100.128.0.1/', // just above it
  'http://11.0.0.1/',
  'http://[2606:4700:4700::1111]/',
  'http://[::ffff:93.184.216.34]/',
  'http://[2002:5db8:d822::1]/', // 6to4 of 93.184.216.34
];

test('private, loopback, link-local, CGNAT, metadata, multicast and reserved literals are blocked in every notation', async () => {
  for (const url of BLOCKED_URLS) {
    const got = await outcome(url, { allowPrivateNetwork: false, lookup: noDns });
    assert.match(got, /^BlockedAddressError: /, url);
  }
});

test('public literals are allowed without any DNS lookup', async () => {
  for (const url of ALLOWED_URLS) {
    assert.is(await outcome(url, { allowPrivateNetwork: false, lookup: noDns }), 'allowed', url);
  }
});

test('a name is blocked when any of its addresses is private and allowed when all are public', async () => {
  const resolver = (table: Record<string, string[]>) => async (host: string) =>
    (table[host] ?? []).map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  const lookup = resolver({
    'public.test': ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'],
    'mixed.test': ['93.184.216.34', '10.0.0.7'],
    'internal.test': ['192.168.1.20'],
    'mapped.test': ['::ffff:127.0.0.1'],
    'nowhere.test': [],
  });
  assert.is(await outcome('https://public.test/a', { allowPrivateNetwork: false, lookup }), 'allowed');
  assert.match(await outcome('https://mixed.test/a', { allowPrivateNetwork: false, lookup }), /^BlockedAddressError/);
  assert.match(await outcome('https://internal.test/a', { allowPrivateNetwork: false, lookup }), /^BlockedAddressError/);
  assert.match(await outcome('https://mapped.test/a', { allowPrivateNetwork: false, lookup }), /^BlockedAddressError/);
  assert.match(await outcome('https://nowhere.test/a', { allowPrivateNetwork: false, lookup }), /^HostLookupError/);
});

test('localhost is blocked through the real resolver', async () => {
  assert.match(await outcome('http://localhost:8080/', { allowPrivateNetwork: false }), /^BlockedAddressError/);
});

test('allowing private networks lets loopback through but still only http and https', async () => {
  assert.is(await outcome('http://127.0.0.1:3000/', { allowPrivateNetwork: true, lookup: noDns }), 'allowed');
  assert.is(await outcome('http://localhost:3000/', { allowPrivateNetwork: true, lookup: noDns }), 'allowed');
  for (const url of ['file:///etc/passwd', 'ftp://93.184.216.34/', 'data:text/plain,hi', 'ws://93.184.216.34/']) {
    assert.is(await outcome(url, { allowPrivateNetwork: true }), 'BlockedAddressError: only http and https URLs are allowed', url);
  }
  assert.is(await outcome('/relative/path', { allowPrivateNetwork: true }), 'BlockedAddressError: the URL is not a valid absolute URL');
});

test('the blocked message is buyer-safe: it names no address or host', async () => {
  try {
    await assertPublicUrl('http://169.254.169.254/latest/meta-data/iam', { allowPrivateNetwork: false });
    assert.unreachable('should have thrown');
  } catch (e) {
    assert.instance(e, BlockedAddressError);
    assert.not.ok((e as Error).message.includes('169.254'));
    assert.is((e as BlockedAddressError).code, 'blocked_address');
  }
});

test('isPublicAddress classifies raw addresses, zone ids and brackets included', () => {
  const table: Array<[string, boolean]> = [
    ['8.8.8.8', true],
    ['127.0.0.1', false],
    ['::1', false],
    ['[::1]', false],
    ['fe80::1%eth0', false],
    ['::ffff:8.8.8.8', true],
    ['::ffff:192.168.0.1', false],
    ['::ffff:0:c0a8:1', false], // IPv4-translated 192.168.0.1
    ['::8.8.8.8', false], // deprecated IPv4-compatible
    ['2001:db8::1', false], // documentation
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', false], // Teredo
    ['2a00:1450:4001:81c::200e', true],
    ['not-an-ip', false],
    ['', false],
  ];
  for (const [ip, expected] of table) assert.is(isPublicAddress(ip), expected, ip);
});

function lookupOnce(host: string, options: dns.LookupOptions): Promise<{ err: Error | null; address: unknown; family?: number }> {
  return new Promise((resolve) => guardedLookup(host, options, (err, address, family) => resolve({ err, address, family })));
}

test('guardedLookup fails a connection to a name that resolves to loopback, in both lookup modes', async () => {
  for (const options of [{}, { all: true }, { all: false, family: 4 }] as dns.LookupOptions[]) {
    const r = await lookupOnce('localhost', options);
    assert.instance(r.err, BlockedAddressError, JSON.stringify(options));
  }
});

test('guardedLookup passes public addresses through in the shape net.connect expects', async () => {
  const one = await lookupOnce('93.184.216.34', {});
  assert.is(one.err, null);
  assert.is(one.address, '93.184.216.34');
  assert.is(one.family, 4);
  const all = await lookupOnce('93.184.216.34', { all: true });
  assert.is(all.err, null);
  assert.equal(all.address, [{ address: '93.184.216.34', family: 4 }]);
});

test('guardedLookup also accepts the two-argument form', async () => {
  const r = await new Promise<Error | null>((resolve) => guardedLookup('127.0.0.1', (err) => resolve(err)));
  assert.instance(r, BlockedAddressError);
});

test('HostLookupError and BlockedAddressError are distinct classes', () => {
  assert.not.instance(new HostLookupError(), BlockedAddressError);
  assert.is(new HostLookupError().code, 'host_lookup_failed');
});

test.run();
