import type { IncomingMessage } from 'node:http';
import { performance } from 'node:perf_hooks';
import { UnreceivedBody } from '../domain/errors.ts';
import { requestRateLimited } from '../observability/metrics.ts';
import { readBody } from './respond.ts';

/**
 * Request bodies on their way (docs/design/rules.md, "Request bodies"): each must arrive within
 * HTTP_BODY_TIMEOUT_MS of the end of its request's headers (the time the service took to get to the
 * read included: the body arrives meanwhile), and one holder (an API key, the GraphQL token) may have
 * at most MAX_BODIES_IN_FLIGHT_PER_KEY of them arriving at once in this process. A client that opens
 * connections and never finishes their bodies so holds a bounded number of them, each for a bounded
 * time; the others are answered at once. Either refusal is an UnreceivedBody: counted nowhere, its
 * connection closed with the answer. Only the reading is counted: a request whose body has arrived
 * (a `Prefer: wait` long poll, say) holds no place here.
 */
export class RequestBodies {
  readonly #arriving = new Map<string, number>();

  constructor(
    readonly timeoutMs: number,
    /** 0: no limit. */
    readonly perHolder: number,
  ) {}

  async read(req: IncomingMessage, ctx: { readonly arrived: number }, holder: string, maxBytes: number): Promise<string> {
    // Wholly received (most bodies arrive with their headers): it cannot stall, so it is not counted.
    if (req.complete) return readBody(req, maxBytes);
    const arriving = this.#arriving.get(holder) ?? 0;
    if (this.perHolder > 0 && arriving >= this.perHolder) {
      requestRateLimited('bodies_in_flight');
      throw UnreceivedBody.tooMany(this.perHolder);
    }
    this.#arriving.set(holder, arriving + 1);
    try {
      // At least a millisecond: no time left is a 408 unless the body is already here.
      const ms = Math.max(1, this.timeoutMs - (performance.now() - ctx.arrived));
      return await readBody(req, maxBytes, { ms, refusal: () => UnreceivedBody.timedOut(this.timeoutMs / 1000) });
    } finally {
      const left = this.#arriving.get(holder)! - 1;
      if (left > 0) this.#arriving.set(holder, left);
      else this.#arriving.delete(holder);
    }
  }
}
