import type { Handler, IoScope } from '../protocol/io-protocol.js';
import { routedEvent } from './subagents.js';

/** The `forward` request: a decision or a steer for a child run, sent to the child of the call its path names, held until that call has one (see `routedEvent`, `ChildRoutes`). */
export const forwardHandler =
  ({ children }: IoScope): Handler<'forward'> =>
  (request) => {
    const routed = routedEvent(request.event);
    if (routed) children.send(routed.callId, routed.event);
  };
