import type { Handler, IoScope } from '../protocol/io-protocol.js';

/** The `forward` request: a decision or a steer for a child run, sent to the child of the call the chart routed it to, held until that call has one (see `routedEvent`, `ChildRoutes`). */
export const forwardHandler =
  ({ children }: IoScope): Handler<'forward'> =>
  (request) =>
    children.send(request.callId, request.event);
