import { createCipheriv, createHmac, hkdfSync } from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { Sealer } from '../../src/security/crypto.ts';

/**
 * The Sealer keeps its keys as key objects. What it computes must stay what it was with the raw key
 * bytes: fingerprints already stored in idempotency records, and values sealed by an earlier release.
 */

const key = Buffer.alloc(32, 7);

test('a fingerprint is the HMAC-SHA256 of the text under the HKDF-derived key, as stored records expect', () => {
  const macKey = Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), 'fingerprint-mac', 32));
  const text = '{"inputs":{"name":"Ada"},"version":null,"workflow":"w"}';
  assert.is(new Sealer(key).mac(text), createHmac('sha256', macKey).update(text, 'utf8').digest('hex'));
});

test('a value sealed with the raw key bytes (an earlier release) opens, and a sealed value opens again', () => {
  const iv = Buffer.alloc(12, 1);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const ct = Buffer.concat([cipher.update('s3cret', 'utf8'), cipher.final()]);
  const earlier = ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ct.toString('base64url')].join('.');
  const sealer = new Sealer(key);
  assert.is(sealer.open(earlier), 's3cret');
  assert.is(sealer.open(sealer.seal('another')), 'another');
  assert.throws(() => new Sealer(Buffer.alloc(32, 8)).open(earlier), /auth|unable/i, 'another key does not open it');
});

test.run();
