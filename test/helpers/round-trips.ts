import pg from 'pg';

/**
 * The messages this process sends to Postgres while `fn` runs, each one round trip: a simple query's
 * text, or the extended query's statements bound before one Sync, by name (the text when unnamed),
 * joined by '; '. Counted where pg writes them (its Connection), below the ORM, so several statements
 * sent in one message count once. Everything the process sends meanwhile is seen: filter for what a
 * test is about.
 */
export async function messagesWhile<T>(fn: () => Promise<T>): Promise<{ result: T; messages: string[] }> {
  const proto = (pg as unknown as { Connection: { prototype: Record<string, (...args: any[]) => unknown> } }).Connection.prototype;
  const { query, parse, bind, sync, flush } = proto;
  const messages: string[] = [];
  const unnamed = new WeakMap<object, string>();
  const bound = new WeakMap<object, string[]>();
  const sent = (connection: object) => {
    const names = bound.get(connection);
    if (names?.length) messages.push(names.join('; '));
    bound.delete(connection);
  };
  proto.query = function (this: object, text: string) {
    messages.push(text);
    return query!.call(this, text);
  };
  proto.parse = function (this: object, q: { name?: string; text: string }) {
    if (!q.name) unnamed.set(this, q.text);
    return parse!.call(this, q);
  };
  proto.bind = function (this: object, config: { statement?: string }) {
    const names = bound.get(this) ?? [];
    names.push(config.statement || unnamed.get(this) || '');
    bound.set(this, names);
    return bind!.call(this, config);
  };
  proto.sync = function (this: object) {
    sent(this);
    return sync!.call(this);
  };
  proto.flush = function (this: object) {
    sent(this);
    return flush!.call(this);
  };
  try {
    return { result: await fn(), messages };
  } finally {
    Object.assign(proto, { query, parse, bind, sync, flush });
  }
}
