import type { InspectionEvent, Observer } from 'xstate';

type Inspector = Observer<InspectionEvent> | ((event: InspectionEvent) => void);

const isMessageList = (value: unknown): value is unknown[] =>
  Array.isArray(value) && value.length > 0 && typeof value[0] === 'object' && value[0] !== null && 'role' in value[0];

/**
 * Wraps an inspector so snapshots reach it with every message list summarized as
 * `{ count, last }`. Inspectors serialize each snapshot, and a 10,000-message context would
 * cost tens of milliseconds per event; the summary keeps the picture and drops the weight.
 */
export function summarizingInspector(
  inspector: Inspector,
  options: { lastMessages?: number | undefined } = {},
): (event: InspectionEvent) => void {
  const keep = options.lastMessages ?? 3;
  const deliver = typeof inspector === 'function' ? inspector : (event: InspectionEvent) => inspector.next?.(event);
  return (event) => {
    if (event.type !== '@xstate.snapshot') return deliver(event);
    const snapshot = event.snapshot as { context?: unknown };
    if (typeof snapshot.context !== 'object' || snapshot.context === null) return deliver(event);
    const context = summarize(snapshot.context, keep, MAX_DEPTH);
    deliver({ ...event, snapshot: { ...snapshot, context } as unknown as typeof event.snapshot });
  };
}

/** Deep enough for the driver, which carries the brain's context inside its own. */
const MAX_DEPTH = 4;

function summarize(value: unknown, keep: number, depth: number): unknown {
  if (isMessageList(value)) return { count: value.length, last: value.slice(-keep) };
  if (depth === 0 || typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, summarize(inner, keep, depth - 1)]));
}
