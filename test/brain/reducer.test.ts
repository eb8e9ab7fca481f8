/**
 * `reduceLoop` is the brain's transition as a plain function, generated from the same table as
 * the statechart. Random feed sequences (legal and illegal, valid and malformed) must move both
 * identically: same state, same context, same "ignored" verdict.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { initialTransition, transition } from 'xstate';
import { acceptsFeed, loopMachine, loopTransitions, reduceLoop } from '../../machines/loop.machine.js';
import type { LoopEvent } from '../../src/brain/loop-events.js';
import { DEFAULT_POLICY, type LoopContext, type Message, type StateName } from '../../src/schemas.js';
import { asst, call, sys, toolMsg, user } from '../support/brain.js';

const POLICIES = [
  DEFAULT_POLICY,
  { ...DEFAULT_POLICY, contextWindow: 1000 },
  { ...DEFAULT_POLICY, contextWindow: 1000, maxTurns: 2 },
  { ...DEFAULT_POLICY, contextWindow: 1000, autoCompact: false },
  { ...DEFAULT_POLICY, contextWindow: 0 },
];

/** One random feed, shaped by the current context so that many of them are accepted. */
function feedFor(context: LoopContext, pick: number, n: number): LoopEvent {
  const open = context.pendingTools.map(({ call: c }) => c);
  switch (pick % 16) {
    case 0:
      return { type: 'next', policy: POLICIES[n % POLICIES.length]! };
    case 1:
      return { type: 'acceptInput', message: n % 7 === 0 ? (asst('x') as never) : user(`u${n}`) };
    case 2:
      return {
        type: 'modelResponse',
        response: n % 3 === 0 ? asst(`a${n}`) : asst('', [call(`c${n}`, n % 5 === 0 ? 'gone' : 'read'), call(`d${n}`)]),
        contextTokens: n % 11 === 0 ? -1 : (n * 37) % 1200,
        availableTools: ['read'],
        ...(n % 4 === 0 && { finishReason: 'length' as const }),
      };
    case 3:
      return { type: 'toolResults', messages: (n % 6 === 0 ? open.slice(1) : open).map((c) => toolMsg(c.id, c.name, `r${n}`)) };
    case 4:
      return { type: 'compactionResult', compacted: [user('summary'), asst('ok')], before: 900, after: (n * 13) % 1000, contextWindow: 1000 };
    case 5:
      return { type: 'compactionNoop', before: 900, after: (n * 17) % 1000, contextWindow: n % 2 ? 1000 : 100 };
    case 6:
      return { type: 'setContextTokens', tokens: n % 9 === 0 ? 1.5 : (n * 29) % 1100 };
    case 7:
      return { type: 'steer', message: user(`s${n}`) };
    case 8:
      return { type: 'inject', message: n % 2 ? sys('note') : user(`i${n}`) };
    case 9:
      return { type: 'cancel' };
    case 10:
      return { type: 'seal', reason: `r${n}` };
    case 11:
      return { type: 'fail', error: { type: n % 5 ? 'X' : '', message: 'm' } };
    case 12:
      return { type: n % 3 === 0 ? 'commitPending' : n % 3 === 1 ? 'salvagePending' : 'discardPending' };
    case 13:
      return { type: 'rewindTo', len: n % 4 };
    case 14:
      return { type: 'adoptPruned', messages: [...context.history, ...context.pending] };
    default:
      return { type: 'next', policy: DEFAULT_POLICY };
  }
}

const plain = (value: unknown) => JSON.parse(JSON.stringify(value));

describe('reduceLoop agrees with the statechart', () => {
  it('on random feed sequences from every starting history, and it never changes a context it was given', () => {
    const histories: Message[][] = [[], [sys(), user('before'), asst('answer')]];
    fc.assert(
      fc.property(
        fc.nat(histories.length - 1),
        fc.array(fc.tuple(fc.nat(15), fc.nat(10_000)), { maxLength: 60 }),
        (h, feeds) => {
          let [snapshot] = initialTransition(loopMachine, { history: histories[h]! });
          let value: StateName = 'Start';
          let context = snapshot.context;
          for (const [pick, n] of feeds) {
            const event = feedFor(context, pick, n);
            const before = snapshot;
            [snapshot] = transition(loopMachine, snapshot, event);
            const given = plain(context);
            const reduced = reduceLoop(value, context, event);
            expect(plain(context)).toEqual(given);
            // No enabled transition: XState keeps the very same snapshot.
            if (reduced === null) expect(snapshot).toBe(before);
            if (reduced) ({ value, context } = reduced);
            expect(value).toBe(snapshot.value);
            expect(plain(context)).toEqual(plain(snapshot.context));
          }
        },
      ),
      { numRuns: 400 },
    );
  });

  it('knows exactly the events the statechart handles in each state', () => {
    for (const state of Object.keys(loopTransitions) as StateName[]) {
      const own = [...loopMachine.states[state]!.ownEvents].sort();
      const accepted = (Object.keys(loopTransitions[state]) as LoopEvent['type'][]).filter((type) => acceptsFeed(state, type));
      expect(accepted.sort()).toEqual(own);
    }
  });
});
