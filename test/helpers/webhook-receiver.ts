import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface WebhookReceiver {
  url: string;
  bodies: string[];
  close(): Promise<void>;
}

/** Takes webhook deliveries over plain HTTP on 127.0.0.1 and keeps their bodies. */
export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const bodies: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      bodies.push(Buffer.concat(chunks).toString('utf8'));
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/hooks`, bodies, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
