/** One SSE frame as a raw reader sees it (heartbeat comments are skipped). */
export interface SseFrame {
  type: string;
  id: string;
  data: any;
}

/**
 * Opens `url` as an SSE stream and collects every frame into `frames` as it arrives; `ended` resolves
 * when the response ends (or the stream is closed), with the status and, for a refusal, its JSON body.
 * A raw reader, so every frame counts whatever its event type.
 */
export function readSse(url: string, headers: Record<string, string>) {
  const frames: SseFrame[] = [];
  const ac = new AbortController();
  const opened = fetch(url, { headers, signal: ac.signal });
  const ended = (async (): Promise<{ status: number; body: any }> => {
    const res = await opened;
    if (res.status !== 200) return { status: res.status, body: await res.json() };
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body!) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true });
        let cut: number;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const field = (name: string) =>
            block
              .split('\n')
              .find((l) => l.startsWith(`${name}:`))
              ?.slice(name.length + 1)
              .trim();
          const data = field('data');
          if (data !== undefined) frames.push({ type: field('event') ?? 'message', id: field('id') ?? '', data: JSON.parse(data) });
        }
      }
    } catch (err) {
      if (!ac.signal.aborted) throw err;
    }
    return { status: 200, body: undefined };
  })();
  ended.catch(() => undefined);
  return { frames, ended, close: () => ac.abort(), status: opened.then((r) => r.status) };
}

/** The frames after the snapshot are the run's whole log: sequences 1, 2, … with no gap or duplicate. */
export function wholeLogProblem(frames: SseFrame[]): string | null {
  if (frames[0]?.type !== 'snapshot') return `the first frame is ${frames[0]?.type ?? 'missing'}, not the snapshot`;
  const seqs = frames.slice(1).map((f) => Number(f.id));
  const ok = seqs.every((s, i) => s === i + 1);
  return ok ? null : `sequences ${seqs.join(',')} have a gap or a duplicate`;
}

/** Cursors around a run's last sequence: below it, just below, at it, just past, far past, past int4. */
export const resumeCursors = (last: number): number[] => [...new Set([1, last - 1, last, last + 1, 100, 2 ** 31])].filter((c) => c > 0);

/** A stream of `runId` resumed after `cursor`: by Last-Event-ID, or by `afterSequence` when `viaQuery`. */
export function resumeSse(base: string, runId: string, cursor: number, key: string, viaQuery: boolean) {
  const auth = { authorization: `Bearer ${key}` };
  return viaQuery
    ? readSse(`${base}/runs/${runId}/stream?afterSequence=${cursor}`, auth)
    : readSse(`${base}/runs/${runId}/stream`, { ...auth, 'last-event-id': String(cursor) });
}

/** The frames after the snapshot are the log's events after `cursor`, in order (none when the cursor is at or past its end). */
export function resumedTailProblem(frames: SseFrame[], log: { sequence: number; type: string }[], cursor: number): string | null {
  if (frames[0]?.type !== 'snapshot') return `the first frame is ${frames[0]?.type ?? 'missing'}, not the snapshot`;
  const got = frames
    .slice(1)
    .map((f) => `${f.id}:${f.type}`)
    .join(',');
  const want = log
    .filter((ev) => ev.sequence > cursor)
    .map((ev) => `${ev.sequence}:${ev.type}`)
    .join(',');
  return got === want ? null : `after ${cursor}: streamed [${got}], the log has [${want}]`;
}
