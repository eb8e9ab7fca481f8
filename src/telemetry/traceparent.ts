/**
 * A run's trace context as stored with the session: a W3C `traceparent` string
 * (`00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`). It comes back from a stored row or
 * snapshot, so it is checked before use; a malformed one starts a fresh trace instead.
 */

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const ALL_ZERO = /^0+$/;

/** The shape a stored trace context must have (the schemas of snapshots and rows use it). */
export const TRACEPARENT_PATTERN = TRACEPARENT;

export function formatTraceparent(context: { traceId: string; spanId: string; traceFlags: number }): string {
  return `00-${context.traceId}-${context.spanId}-${(context.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

export function parseTraceparent(value: string): { traceId: string; spanId: string; traceFlags: number } | undefined {
  const match = TRACEPARENT.exec(value);
  if (!match || ALL_ZERO.test(match[1]!) || ALL_ZERO.test(match[2]!)) return undefined;
  return { traceId: match[1]!, spanId: match[2]!, traceFlags: Number.parseInt(match[3]!, 16) };
}
