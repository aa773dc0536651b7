import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createHmac,
  createSecretKey,
  hash,
  hkdfSync,
  randomBytes,
  timingSafeEqual,
  type KeyObject,
} from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Secrets at rest. API keys are only ever stored as sha256 hashes (they are high-entropy, so a salted
 * slow hash buys nothing and would cost a bcrypt per request). Provider keys, password inputs, supplied
 * credentials and webhook secrets must be recovered to be used, so they are sealed with AES-256-GCM.
 */

// One-shot hashes: every request hashes its API key, and a Hash object per call costs more than the hash.
export function hashApiKey(secret: string): string {
  return hash('sha256', secret, 'hex');
}

export function sha256(text: string): string {
  return hash('sha256', text, 'hex');
}

export function constantTimeEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb) && a.length === b.length;
}

export class Sealer {
  // Key objects, made once: given a Buffer, every createHmac / createCipheriv imports the key again,
  // which costs several times the MAC of a request's fingerprint itself.
  readonly #key: KeyObject;

  readonly #macKey: KeyObject;

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error('encryption key must be 32 bytes');
    this.#key = createSecretKey(key);
    this.#macKey = createSecretKey(Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), 'fingerprint-mac', 32)));
  }

  /** Keyed hash for fingerprints over request data that may contain secrets (no offline guessing). */
  mac(text: string): string {
    return createHmac('sha256', this.#macKey).update(text, 'utf8').digest('hex');
  }

  /** `v1.<iv>.<tag>.<ciphertext>`, base64url parts. */
  seal(plaintext: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv);
    const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ct.toString('base64url')].join('.');
  }

  open(sealed: string): string {
    const [v, iv, tag, ct] = sealed.split('.');
    if (v !== 'v1' || !iv || !tag || ct === undefined) throw new Error('not a sealed value');
    const decipher = createDecipheriv('aes-256-gcm', this.#key, Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
  }
}

export function parseKey(text: string): Buffer {
  const t = text.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(t) ? Buffer.from(t, 'hex') : Buffer.from(t, 'base64');
  if (key.length !== 32) throw new Error('ENCRYPTION_KEY must be 32 bytes, as 64 hex characters or base64');
  return key;
}

/** The configured key, or one generated once and kept beside the embedded database. */
export function loadOrCreateKey(configured: string | undefined, dataDir: string): Buffer {
  if (configured) return parseKey(configured);
  const file = join(dataDir, 'encryption.key');
  if (existsSync(file)) return parseKey(readFileSync(file, 'utf8'));
  mkdirSync(dataDir, { recursive: true });
  const key = randomBytes(32);
  writeFileSync(file, key.toString('hex') + '\n', { mode: 0o600 });
  return key;
}
