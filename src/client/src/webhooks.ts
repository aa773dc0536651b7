import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import type { RunWebhookPayload } from './types.ts';

export { WebhookVerificationError };

type HeaderBag = Headers | Record<string, string | string[] | undefined>;

/**
 * Checks a webhook delivery the Standard Webhooks way (`webhook-id`, `webhook-timestamp`,
 * `webhook-signature`: HMAC-SHA256 with the endpoint's `whsec_…` secret, timestamp within 5 minutes)
 * and returns its parsed body `{ type, timestamp, data: Run }`. Pass the body exactly as received
 * (the raw string or bytes, not re-serialised JSON). Throws WebhookVerificationError otherwise.
 * Deliveries are at least once: use `webhook-id` to drop duplicates.
 */
export function verifyWebhook(secret: string, body: string | Uint8Array, headers: HeaderBag): RunWebhookPayload {
  const raw = typeof body === 'string' ? body : Buffer.from(body);
  return new Webhook(secret).verify(raw, pick(headers)) as RunWebhookPayload;
}

function pick(headers: HeaderBag): Record<string, string> {
  const get = (name: string): string => {
    if (headers instanceof Headers) return headers.get(name) ?? '';
    const v = headers[name] ?? Object.entries(headers).find(([k]) => k.toLowerCase() === name)?.[1];
    return Array.isArray(v) ? (v[0] ?? '') : (v ?? '');
  };
  return { 'webhook-id': get('webhook-id'), 'webhook-timestamp': get('webhook-timestamp'), 'webhook-signature': get('webhook-signature') };
}
