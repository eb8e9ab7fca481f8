import { ingressKeyProblem } from './ingress-url.js';

/**
 * Text deltas as the model streams them, published to the session's channel through Restate's
 * ingress, outside the journal: they exist only while a step runs live (a replayed step has no
 * stream), so they cannot be journaled, and they are never read back, so they change nothing
 * that is persisted. Best effort: a delta lost to a network error is only missing from a display;
 * a step that runs again after a crash streams again (a client resets a turn's text on
 * `turn.started`-less repeats by the `turn` number each delta carries).
 */
export interface LiveDeltas {
  push(event: Record<string, unknown> & { type: string }): void;
  /** Sends what was buffered (the turn loop calls it between steps; a timer calls it meanwhile). */
  flush(): void;
  close(): void;
}

const FLUSH_EVERY_MS = 50;

export function liveDeltas(ingressUrl: string, channelName: string, sessionId: string): LiveDeltas {
  // A session no ingress path can name (`..` would publish to `<ingress>/publish/send`) has no live deltas.
  if (ingressKeyProblem(sessionId) !== null) return { push: () => {}, flush: () => {}, close: () => {} };
  const url = `${ingressUrl.replace(/\/$/, '')}/${encodeURIComponent(channelName)}/${encodeURIComponent(sessionId)}/publish/send`;
  let buffer: (Record<string, unknown> & { type: string })[] = [];
  const flush = () => {
    if (buffer.length === 0) return;
    const body = JSON.stringify(buffer);
    buffer = [];
    fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: AbortSignal.timeout(5_000) }).catch(() => {});
  };
  const timer = setInterval(flush, FLUSH_EVERY_MS);
  timer.unref();
  return {
    push: (event) => void buffer.push(event),
    flush,
    close: () => {
      clearInterval(timer);
      flush();
    },
  };
}
