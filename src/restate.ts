/**
 * `loopchart/restate`: agent sessions as Restate virtual objects (durable across workers, worker
 * and server crashes). Needs `@restatedev/restate-sdk` (an optional peer); the core entry never
 * loads it. The polyfill comes first: the SDK needs `Promise.withResolvers` (Node 22+), and this
 * package supports Node 20.
 */
import './restate/polyfill.js';

export { installedWithResolversPolyfill } from './restate/polyfill.js';
export { restateSession, type RestateSessionOptions, type SessionSummaryReply } from './restate/session-object.js';
export type { StreamedEvent } from './restate/channel.js';
export { HandlerPayloads, type HandlerName, type HandlerPayload } from './restate/payloads.js';
export { restateSchedules, type RestateSchedulesOptions } from './restate/schedule-object.js';
export {
  restateScheduleClient,
  type RestateScheduleClient,
  type RestateScheduleClientOptions,
  type RestateScheduleOptions,
} from './restate/schedule-client.js';
