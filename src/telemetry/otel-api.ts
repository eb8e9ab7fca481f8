import { createRequire } from 'node:module';
import type * as Api from '@opentelemetry/api';
import { LoopchartError } from '../errors.js';

export type OtelApi = typeof Api;

/**
 * Telemetry is on and `@opentelemetry/api` cannot be loaded: install it (an optional peer
 * dependency), or pass `telemetry.tracer`, which needs it anyway.
 *
 * @example
 * ```ts
 * try {
 *   createAgentMachine({ model, telemetry: {} });
 * } catch (error) {
 *   if (TelemetryUnavailableError.isInstance(error)) console.error('npm install @opentelemetry/api');
 * }
 * ```
 */
export class TelemetryUnavailableError extends LoopchartError {
  constructor(options?: { cause?: unknown }) {
    super('TelemetryUnavailable', 'telemetry needs @opentelemetry/api: npm install @opentelemetry/api (an optional peer dependency of loopchart)', options);
  }
}

let api: OtelApi | undefined;

/**
 * The OpenTelemetry API, loaded on first use only: `import 'loopchart'` never loads it, and an
 * agent without telemetry never does. Synchronous (`createRequire`, as the SQLite driver is
 * loaded) because `createAgentMachine` is; the API keeps its state in a global registry, so
 * this copy and the application's share the tracer provider and context manager.
 */
export function otelApi(): OtelApi {
  if (api) return api;
  try {
    api = createRequire(import.meta.url)('@opentelemetry/api') as OtelApi;
  } catch (error) {
    throw new TelemetryUnavailableError({ cause: error });
  }
  return api;
}
