import * as restate from '@restatedev/restate-sdk';
import type { ExternalEvent } from '../agent/protocol/events.js';

/**
 * A session's channel: a second virtual object with the same key, for the two streams that must
 * flow while the session's exclusive handler is busy running a turn.
 *
 * - Control (approve, deny, steer, cancel, seal) from any client: `post` appends the event and
 *   wakes the running turn through the awakeable it armed; the turn `take`s what arrived since
 *   its cursor. Posting and arming are both exclusive on the channel, so a wake-up is never lost
 *   between them.
 * - Events for clients (tool and turn events, approvals, outcomes, text deltas): `publish`
 *   appends them by index, `read` (shared) returns them from a cursor. The last
 *   `EVENT_RETENTION` events are kept. They are never read back by the session: displaying them
 *   changes nothing that is persisted.
 */

/** How many published events a channel keeps (older ones are cleared as new ones arrive). */
export const EVENT_RETENTION = 1000;

/** One published event and its position in the session's stream. */
export interface StreamedEvent {
  index: number;
  event: Record<string, unknown> & { type: string };
}

export interface ChannelTake {
  /** Control events posted since the cursor, oldest first. */
  events: ExternalEvent[];
  /** The cursor to take from next time. */
  next: number;
  /** When the channel answered (journaled): the turn's clock moves with it. */
  at: number;
}

type ChannelState = Record<string, unknown>;

const posted = async (ctx: restate.ObjectSharedContext<ChannelState>, key: string): Promise<number> => ((await ctx.get<number>(key)) as number | null) ?? 0;

export function channelObject(name: string) {
  return restate.object({
    name,
    description: 'Control events into a loopchart session and its event stream out (see loopchart/restate).',
    handlers: {
      post: async (ctx: restate.ObjectContext, event: ExternalEvent): Promise<{ index: number }> => {
        const index = await posted(ctx, 'controlCount');
        ctx.set(`control:${index}`, event);
        ctx.set('controlCount', index + 1);
        const armed = await ctx.get<string>('armed');
        if (armed) {
          ctx.resolveAwakeable(armed, index);
          ctx.clear('armed');
        }
        return { index };
      },
      /**
       * Control events from `cursor` on (none with `cursor: null`: a new turn does not act on
       * what was posted before it started), consumed; `arm` is the awakeable the next `post` resolves.
       */
      take: async (ctx: restate.ObjectContext, request: { cursor: number | null; arm: string }): Promise<ChannelTake> => {
        const count = await posted(ctx, 'controlCount');
        const from = request.cursor ?? count;
        const events: ExternalEvent[] = [];
        for (let index = from; index < count; index++) {
          const event = await ctx.get<ExternalEvent>(`control:${index}`);
          if (event) events.push(event);
        }
        // Consumed (or skipped) entries are not needed again: one turn at a time reads them.
        const firstKept = (await ctx.get<number>('controlFirst')) ?? 0;
        for (let index = firstKept; index < count; index++) ctx.clear(`control:${index}`);
        ctx.set('controlFirst', count);
        ctx.set('armed', request.arm);
        return { events, next: count, at: await ctx.date.now() };
      },
      publish: async (ctx: restate.ObjectContext, events: StreamedEvent['event'][]): Promise<void> => {
        let count = await posted(ctx, 'eventCount');
        for (const event of events) {
          ctx.set(`event:${count}`, event);
          if (count >= EVENT_RETENTION) ctx.clear(`event:${count - EVENT_RETENTION}`);
          count++;
        }
        ctx.set('eventCount', count);
      },
      read: restate.handlers.object.shared(
        async (ctx: restate.ObjectSharedContext, request: { cursor: number; limit: number }): Promise<{ events: StreamedEvent[]; next: number }> => {
          const count = await posted(ctx, 'eventCount');
          const from = Math.max(request.cursor, count - EVENT_RETENTION);
          const to = Math.min(count, from + request.limit);
          const events: StreamedEvent[] = [];
          for (let index = from; index < to; index++) {
            const event = await ctx.get<StreamedEvent['event']>(`event:${index}`);
            if (event) events.push({ index, event });
          }
          return { events, next: to };
        },
      ),
    },
  });
}

export type ChannelObject = ReturnType<typeof channelObject>;
