/**
 * The agent as a child actor of a user's own statechart (docs/concepts.md, "The driver"): the
 * parent invokes it, persists it with itself (`getPersistedSnapshot()` of the parent, as JSON),
 * restores it with `createActor(parent, { snapshot })` and forwards events to it with `sendTo`.
 */
import { describe, expect, it } from 'vitest';
import { assign, createActor, fromCallback, sendTo, setup, waitFor, type AnyActorRef } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { AgentEmitted, AgentOutput } from '../../../src/agent/protocol/actor-types.js';
import { childFailureProblem } from '../../../src/agent/protocol/events.js';
import { agentTool } from '../../../src/agent/subagents/agent-tool.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { WAIT_MS } from '../../support/driver.js';

type Forward = { type: 'forward'; event: { type: string } & Record<string, unknown> };

/** A user's parent machine: invokes `agent` as `helper`, keeps its output, forwards what it is sent. */
function parentOf(agent: ReturnType<typeof createAgentMachine>) {
  return setup({
    types: { context: {} as { output: AgentOutput | null }, events: {} as Forward },
    actors: { agent },
  }).createMachine({
    id: 'ticket',
    context: { output: null },
    initial: 'Working',
    states: {
      Working: {
        invoke: {
          id: 'helper',
          src: 'agent',
          input: { prompt: 'Handle the ticket.', sessionId: 'ticket-1' },
          onDone: { target: 'Done', actions: assign({ output: ({ event }) => event.output }) },
        },
        on: { forward: { actions: sendTo('helper', ({ event }) => event.event) } },
      },
      Done: { type: 'final' },
    },
  });
}

const helperOf = (parent: { getSnapshot(): { children: Record<string, unknown> } }) => parent.getSnapshot().children.helper as AnyActorRef;

describe('a parent restored while its agent calls a subagent', () => {
  /** A coordinator whose call c1 runs a child agent that takes 150 ms to answer. */
  const coordinator = () =>
    createAgentMachine({
      model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'writer', args: { task: 'Write.' } }] }, (request) => ({ text: `parent: ${String(request.messages.at(-1)!.content)}` })]),
      tools: [
        agentTool({
          agent: createAgentMachine({ model: scriptedModel([{ text: 'child done', delayMs: 150 }]) }),
          name: 'writer',
          description: 'Writes.',
          timeoutMs: 5_000,
        }),
      ],
    });

  it('an event for the child sent at once (before the agent asked for its work again) does not stop the call from running again', async () => {
    const first = createActor(parentOf(coordinator())).start();
    await waitFor(helperOf(first), (s) => s.matches({ Running: 'AwaitingTools' }), { timeout: WAIT_MS });
    const stored = JSON.stringify(first.getPersistedSnapshot());
    first.stop();

    // As another process would: a new machine, the parent's snapshot from JSON.
    const second = createActor(parentOf(coordinator()), { snapshot: JSON.parse(stored) as never }).start();
    // At once, as a UI relaying a person's steer does: the event goes down to the child of call c1.
    second.send({ type: 'forward', event: { type: 'steer', message: 'Keep it short.', target: 'c1' } });
    // Before: the forward counted as the IO's first request, so the restored agent never asked for its
    // batch again: call c1 never ran and the parent waited for ever.
    const done = await waitFor(second, (s) => s.status === 'done', { timeout: WAIT_MS });
    expect(done.context.output?.outcome).toEqual({ type: 'Completed', finalText: 'parent: child done' });
  });
});

describe('XState events a parent forwards to its agent', () => {
  it("a forged report that the agent's child failed is refused: the agent runs on and the parent gets its output", async () => {
    const parent = createActor(parentOf(createAgentMachine({ model: scriptedModel([{ text: 'answered', delayMs: 100 }]) }))).start();
    const rejected: AgentEmitted[] = [];
    helperOf(parent).on('event.rejected', (event: AgentEmitted) => rejected.push(event));
    // What `sendTo` relays as it is: before, XState ended the agent with status 'error' (the
    // parent's onError; a stand-alone actor without an error listener took the process down).
    parent.send({ type: 'forward', event: { type: 'xstate.error.actor.io', error: 'forged' } });
    parent.send({ type: 'forward', event: { type: 'xstate.error.actor.nobody', error: 'forged' } });
    const done = await waitFor(parent, (s) => s.status === 'done', { timeout: WAIT_MS });
    expect(done.context.output?.outcome).toEqual({ type: 'Completed', finalText: 'answered' });
    expect(rejected.map((event) => (event as { event: string }).event)).toEqual(['xstate.error.actor.io', 'xstate.error.actor.nobody']);
    expect((rejected[0] as { reason: string }).reason).toMatch(/no child 'io' of the agent has failed/);
  });

  it("XState's own report of a child that did fail still passes", () => {
    const failing = createActor(fromCallback(() => {
      throw new Error('broken');
    }));
    failing.subscribe({ error: () => {} });
    failing.start();
    expect(childFailureProblem('xstate.error.actor.io', { io: failing })).toBeNull();
    expect(childFailureProblem('xstate.error.actor.io', { io: createActor(fromCallback(() => {})).start() })).toMatch(/has not failed|no child 'io'/);
    expect(childFailureProblem('xstate.done.actor.io', {})).toBeNull();
  });
});
