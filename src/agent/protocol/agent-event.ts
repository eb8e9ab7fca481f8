import type { ExternalEvent, MalformedEvent } from './events.js';
import type { IoEvent } from './io-protocol.js';

/** A run's span reports its trace context to the chart, which records it (see trace-marks.ts). */
export type TelemetryEvent = { type: 'telemetry.traced'; runIndex: number; traceparent: string };

/** Every event the agent actor takes: from outside (checked, see `checkedExternal`), from its IO actor, from its tracing. */
export type AgentEvent = ExternalEvent | MalformedEvent | IoEvent | TelemetryEvent;

/** The event as its type says it is: for actions behind a guard that checked it. */
export const as = <T extends AgentEvent['type']>(event: AgentEvent, _type: T) => event as Extract<AgentEvent, { type: T }>;
