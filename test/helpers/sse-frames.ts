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
          const field = (name: string) => block.split('\n').find((l) => l.startsWith(`${name}:`))?.slice(name.length + 1).trim();
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
