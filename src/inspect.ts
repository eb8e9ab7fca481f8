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
  options: { lastMessages?: number } = {},
): (event: InspectionEvent) => void {
  const keep = options.lastMessages ?? 3;
  const deliver = typeof inspector === 'function' ? inspector : (event: InspectionEvent) => inspector.next?.(event);
  return (event) => {
    if (event.type !== '@xstate.snapshot') return deliver(event);
    const snapshot = event.snapshot as { context?: unknown };
    const context = snapshot.context;
    if (typeof context !== 'object' || context === null) return deliver(event);
    const summarized = Object.fromEntries(
      Object.entries(context).map(([key, value]) =>
        isMessageList(value) ? [key, { count: value.length, last: value.slice(-keep) }] : [key, value],
      ),
    );
    deliver({ ...event, snapshot: { ...snapshot, context: summarized } as unknown as typeof event.snapshot });
  };
}
