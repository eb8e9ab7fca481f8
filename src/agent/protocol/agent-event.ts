import type { ExternalEvent, MalformedEvent } from './events.js';
import type { IoEvent } from './io-protocol.js';

/** A run's span reports its trace context to the chart, which records it (see trace-marks.ts). */
export type TelemetryEvent = { type: 'telemetry.traced'; runIndex: number; traceparent: string | null };

// Trusted by identity, as IO events are: only the tracing makes them (see `telemetryReport`).
const madeByTracing = new WeakSet<object>();

/** A report of the agent's own tracing, marked so the chart tells it from one sent from outside. */
export const telemetryReport = (report: TelemetryEvent): TelemetryEvent => (madeByTracing.add(report), report);

/** Whether an event is the tracing's own report (and not one sent from outside). */
export const fromTelemetry = (event: object): boolean => madeByTracing.has(event);

/** Every event the agent actor takes: from outside (checked, see `checkedExternal`), from its IO actor, from its tracing. */
export type AgentEvent = ExternalEvent | MalformedEvent | IoEvent | TelemetryEvent;

/** The event as its type says it is: for actions behind a guard that checked it. */
export const as = <T extends AgentEvent['type']>(event: AgentEvent, _type: T) => event as Extract<AgentEvent, { type: T }>;
