/**
 * A model names its tool calls, and a name may hold the tree's separator (`a/b`). A decision or a
 * target for a subagent's call is addressed `<parent call id>/<child call id>`, so it is routed by
 * the calls the run's batch has: the call whose id (and the separator) begins it. An id that reads
 * as the call of more than one call of the batch (`a/b/p1` with calls `a` and `a/b`) is refused,
 * never given to either.
 */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { AgentEmitted, AgentOutput } from '../../../src/agent/protocol/actor-types.js';
import { agentTool } from '../../../src/agent/subagents/agent-tool.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { defineTool } from '../../../src/tools/define-tool.js';

async function until(check: () => boolean, ms = 3_000): Promise<void> {
  for (const end = Date.now() + ms; !check(); await new Promise((resolve) => setTimeout(resolve, 5))) {
    if (Date.now() > end) throw new Error(`not so after ${ms} ms`);
  }
}

/** A child agent that calls `write` (which needs approval) as call `callId`, then answers with its result. */
function writer(label: string, ran: string[], callId = 'p1') {
  const write = defineTool({
    name: 'write',
    description: 'Writes.',
    input: z.object({}),
    needsApproval: true,
    execute: () => (ran.push(label), `${label} wrote`),
  });
  return createAgentMachine({
    model: scriptedModel([{ toolCalls: [{ id: callId, name: 'write', args: {} }] }, (request) => ({ text: String(request.messages.at(-1)!.content) })]),
    tools: [write],
  });
}

type Requested = Extract<AgentEmitted, { type: 'approval.requested' }>;

function start(calls: { id: string; name: string }[], tools: ReturnType<typeof agentTool>[]) {
  const parent = createAgentMachine({
    model: scriptedModel([{ toolCalls: calls.map((call) => ({ ...call, args: { task: 'write it' } })) }, { text: 'all done' }]),
    tools,
  });
  const actor = createActor(parent, { input: { sessionId: 'boss', prompt: 'go' } });
  const requested: Requested[] = [];
  const refused: AgentEmitted[] = [];
  const doubtRefused: AgentEmitted[] = [];
  const rejected: Extract<AgentEmitted, { type: 'event.rejected' }>[] = [];
  actor.on('approval.requested', (event) => requested.push(event));
  actor.on('approval.refused', (event) => refused.push(event));
  actor.on('doubt.refused', (event) => doubtRefused.push(event));
  actor.on('event.rejected', (event) => rejected.push(event));
  const done = new Promise<AgentOutput>((resolve, reject) => actor.subscribe({ complete: () => resolve(actor.getSnapshot().output!), error: reject }));
  actor.start();
  return { actor, requested, refused, doubtRefused, rejected, done };
}

describe("a subagent's call under a parent call whose id holds '/'", () => {
  it('an approval sent to the qualified id the request gave runs that child call, and the parent completes', async () => {
    const ran: string[] = [];
    const { actor, requested, refused, done } = start([{ id: 'a/b', name: 'kid' }], [agentTool({ agent: writer('kid', ran), name: 'kid', description: 'k' })]);
    await until(() => requested.length > 0);
    const request = requested[0]!.requests[0]!;
    expect(request.toolCallId).toBe('a/b/p1');
    actor.send({ type: 'approve', ...request });
    // Before: routed to a call 'a' the batch has not, refused, and the run waited for ever.
    await until(() => actor.getSnapshot().status === 'done');
    const output = await done;
    expect(refused).toEqual([]);
    expect(ran).toEqual(['kid']);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'all done' });
    expect(output.messages.find((m) => m.role === 'tool')).toMatchObject({ toolCallId: 'a/b', content: 'kid wrote' });
  });

  it("with calls 'a' and 'a/b' in one batch: 'a/p1' reaches the child of 'a'; 'a/b/p1', which reads as either child's call, is refused and reaches neither", async () => {
    const ran: string[] = [];
    const { actor, requested, refused, doubtRefused, rejected } = start(
      [
        { id: 'a', name: 'first' },
        { id: 'a/b', name: 'second' },
      ],
      [agentTool({ agent: writer('first', ran), name: 'first', description: 'f' }), agentTool({ agent: writer('second', ran), name: 'second', description: 's' })],
    );
    await until(() => requested.length === 2);
    const ids = requested.flatMap((event) => event.requests.map((request) => request.toolCallId)).sort();
    expect(ids).toEqual(['a/b/p1', 'a/p1']);
    const of = (id: string) => requested.flatMap((event) => event.requests).find((request) => request.toolCallId === id)!;

    actor.send({ type: 'approve', ...of('a/b/p1') });
    actor.send({ type: 'steer', message: 'for whom?', target: 'a/b' });
    actor.send({ type: 'doubt.decide', toolCallId: 'a/b/p1', action: 'fail' });
    const ambiguous = expect.stringContaining("'a', 'a/b'");
    expect(refused).toMatchObject([{ type: 'approval.refused', toolCallId: 'a/b/p1', refusal: 'unknown-call', detail: ambiguous }]);
    expect(doubtRefused).toMatchObject([{ type: 'doubt.refused', toolCallId: 'a/b/p1', refusal: 'unknown-call', detail: ambiguous }]);
    expect(rejected).toMatchObject([
      { event: 'approve', reason: ambiguous },
      { event: 'steer', reason: ambiguous },
      { event: 'doubt.decide', reason: ambiguous },
    ]);

    actor.send({ type: 'approve', ...of('a/p1') });
    await until(() => ran.length === 1);
    // Bounded: a wrongly routed decision would have run a call by now.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(ran).toEqual(['first']);
    actor.stop();
  });
});
