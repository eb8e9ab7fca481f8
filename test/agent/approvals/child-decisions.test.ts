/**
 * A decision for a child's call (`c1/p1`, see docs/agent/subagents.md) goes down to the child
 * that runs it; when no child of that call runs any more (the parent's run was cancelled, the
 * call ended, the run is over) it is refused as an unknown call is, `approval.refused` with the
 * actor going on and `DurableSession.decide` throwing `ApprovalRefusedError`, never taken in
 * silence (before, it vanished: the caller was told nothing and `decide` resolved).
 */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { type AgentEmitted } from '../../../src/agent/protocol/actor-types.js';
import { agentTool } from '../../../src/agent/subagents/agent-tool.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { ApprovalRefusedError } from '../../../src/sessions/stored-decision.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';
import { defineTool } from '../../../src/tools/define-tool.js';

async function until(check: () => boolean, ms = 3_000): Promise<void> {
  for (const end = Date.now() + ms; !check(); await new Promise((resolve) => setTimeout(resolve, 5))) {
    if (Date.now() > end) throw new Error(`not so after ${ms} ms`);
  }
}

function team() {
  const ran: string[] = [];
  const pay = defineTool({ name: 'pay', description: 'Pays.', input: z.object({}), needsApproval: true, execute: () => (ran.push('pay'), 'paid') });
  const child = createAgentMachine({ model: scriptedModel([{ toolCalls: [{ id: 'p1', name: 'pay', args: {} }] }, { text: 'child done' }]), tools: [pay] });
  const slow = defineTool({ name: 'slow', description: 'Waits.', input: z.object({}), execute: () => new Promise((resolve) => setTimeout(() => resolve('slept'), 200)) });
  const parent = createAgentMachine({
    model: scriptedModel([
      { toolCalls: [{ id: 'c1', name: 'kid', args: { task: 'pay' } }] },
      { toolCalls: [{ id: 'c2', name: 'slow', args: {} }] },
      { text: 'parent done' },
      { text: 'again' },
    ]),
    tools: [agentTool({ agent: child, name: 'kid', description: 'Pays things.' }), slow],
  });
  return { ran, parent };
}

/** The parent as an actor, started, with every event it emits. */
function started(parent: ReturnType<typeof team>['parent']) {
  const actor = createActor(parent);
  const events: AgentEmitted[] = [];
  actor.on('*', (event) => events.push(event));
  actor.start();
  return { actor, events };
}

describe("a decision for a child's call when no child of that call runs", () => {
  it('is refused after the run was cancelled; nothing runs', async () => {
    const { ran, parent } = team();
    const { actor, events } = started(parent);
    actor.send({ type: 'input', message: 'go' });
    await until(() => events.some((e) => e.type === 'approval.requested'));
    const request = (events.find((e) => e.type === 'approval.requested') as Extract<AgentEmitted, { type: 'approval.requested' }>).requests[0]!;
    expect(request.toolCallId).toBe('c1/p1');
    actor.send({ type: 'cancel' });
    await until(() => actor.getSnapshot().value === 'Idle');
    actor.send({ type: 'approve', toolCallId: 'c1/p1', digest: request.digest });
    expect(events.filter((e) => e.type === 'approval.refused')).toMatchObject([{ toolCallId: 'c1/p1', approved: true, refusal: 'unknown-call' }]);

    expect(ran).toEqual([]);
    actor.stop();
  });

  it('is refused once the call that ran the child has ended, while the run goes on', async () => {
    const { ran, parent } = team();
    const { actor, events } = started(parent);
    // Call c1 runs a child whose call is approved; the child ends, and the run goes on with c2.
    actor.send({ type: 'input', message: 'go' });
    await until(() => events.some((e) => e.type === 'approval.requested'));
    actor.send({ type: 'approve', toolCallId: 'c1/p1' });
    await until(() => events.some((e) => e.type === 'tool.started' && e.call.id === 'c2'));
    actor.send({ type: 'deny', toolCallId: 'c1/p1' });
    expect(events.filter((e) => e.type === 'approval.refused')).toMatchObject([{ toolCallId: 'c1/p1', approved: false, refusal: 'unknown-call' }]);
    await until(() => actor.getSnapshot().value === 'Idle');
    expect(ran).toEqual(['pay']);
    actor.stop();
  });

  it("DurableSession.decide on such a request throws ApprovalRefusedError instead of resolving", async () => {
    const { parent } = team();
    const session = await DurableSession.open({ machine: parent, store: new MemorySessionStore(), sessionId: 'boss' });
    const asked = new Promise<Extract<AgentEmitted, { type: 'approval.requested' }>>((resolve) => session.actor.on('approval.requested', resolve));
    session.send({ type: 'input', message: 'go' });
    const request = (await asked).requests[0]!;
    session.send({ type: 'cancel' });
    await session.whenIdle();
    await expect(session.decide(request, { approved: true })).rejects.toSatisfy((error) => ApprovalRefusedError.isInstance(error));
    await session.close();
  });
});
