import pg from 'pg';

/**
 * The messages this process sends to Postgres while `fn` runs, each one round trip: a simple query's
 * text, or an extended query's statement name (its text when unnamed). Counted where pg writes them
 * (its Connection), below the ORM and the prepared-statement layer, so several statements sent in one
 * message count once. Everything the process sends meanwhile is seen: filter for what a test is about.
 */
export async function messagesWhile<T>(fn: () => Promise<T>): Promise<{ result: T; messages: string[] }> {
  const proto = (pg as unknown as { Connection: { prototype: Record<string, (...args: any[]) => unknown> } }).Connection.prototype;
  const { query, parse, bind } = proto;
  const messages: string[] = [];
  const unnamed = new WeakMap<object, string>();
  proto.query = function (this: object, text: string) {
    messages.push(text);
    return query!.call(this, text);
  };
  proto.parse = function (this: object, q: { name?: string; text: string }) {
    if (!q.name) unnamed.set(this, q.text);
    return parse!.call(this, q);
  };
  proto.bind = function (this: object, config: { statement?: string }) {
    messages.push(config.statement || unnamed.get(this) || '');
    return bind!.call(this, config);
  };
  try {
    return { result: await fn(), messages };
  } finally {
    Object.assign(proto, { query, parse, bind });
  }
}
