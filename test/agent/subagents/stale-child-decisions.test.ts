/**
 * A decision on a child's call in doubt (`doubt.decide` with `c1/p1`) goes down to the child of
 * call `c1` while one may run; once that call has ended (or the run has), no child is there to
 * take it, and it is refused as an unknown call (`doubt.refused`, `event.rejected`) instead of
 * being forwarded to no one in silence.
 */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { AgentEmitted } from '../../../src/agent/protocol/actor-types.js';
import { agentTool } from '../../../src/agent/subagents/agent-tool.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { defineTool } from '../../../src/tools/define-tool.js';

async function until(check: () => boolean, ms = 3_000): Promise<void> {
  for (const end = Date.now() + ms; !check(); await new Promise((resolve) => setTimeout(resolve, 5))) {
    if (Date.now() > end) throw new Error(`not so after ${ms} ms`);
  }
}

describe("a decision on a child's call in doubt when no child of that call runs", () => {
  it('is refused while the run goes on with a later call, and after the run ended', async () => {
    const child = createAgentMachine({ model: scriptedModel([{ text: 'child done' }]) });
    let release!: () => void;
    const gate = defineTool({ name: 'gate', description: 'Waits.', input: z.object({}), execute: () => new Promise<string>((resolve) => (release = () => resolve('open'))) });
    const parent = createAgentMachine({
      model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'kid', args: { task: 'x' } }] }, { toolCalls: [{ id: 'c2', name: 'gate', args: {} }] }, { text: 'done' }]),
      tools: [agentTool({ agent: child, name: 'kid', description: 'k' }), gate],
    });
    const actor = createActor(parent);
    const refused: AgentEmitted[] = [];
    actor.on('doubt.refused', (event) => refused.push(event));
    actor.start();
    actor.send({ type: 'input', message: 'go' });
    await until(() => release !== undefined);
    actor.send({ type: 'doubt.decide', toolCallId: 'c1/p1', action: 'fail' });
    expect(refused).toMatchObject([{ toolCallId: 'c1/p1', refusal: 'unknown-call' }]);
    release();
    await until(() => actor.getSnapshot().value === 'Idle');
    actor.send({ type: 'doubt.decide', toolCallId: 'c1/p1', action: 'rerun' });
    expect(refused).toHaveLength(2);
    actor.stop();
  });
});

describe('a steer for a child that no call runs', () => {
  it('is refused (event.rejected naming the call), neither lost in silence nor given to the parent', async () => {
    const child = createAgentMachine({ model: scriptedModel([{ text: 'child done' }]) });
    let release!: () => void;
    const gate = defineTool({ name: 'gate', description: 'Waits.', input: z.object({}), execute: () => new Promise<string>((resolve) => (release = () => resolve('open'))) });
    const users: string[][] = [];
    const parent = createAgentMachine({
      model: scriptedModel([
        { toolCalls: [{ id: 'c1', name: 'kid', args: { task: 'x' } }] },
        { toolCalls: [{ id: 'c2', name: 'gate', args: {} }] },
        (request) => (users.push(request.messages.filter((m) => m.role === 'user').map((m) => String(m.content))), { text: 'done' }),
      ]),
      tools: [agentTool({ agent: child, name: 'kid', description: 'k' }), gate],
    });
    const actor = createActor(parent);
    const rejected: Extract<AgentEmitted, { type: 'event.rejected' }>[] = [];
    actor.on('event.rejected', (event) => rejected.push(event));
    actor.start();
    actor.send({ type: 'input', message: 'go' });
    await until(() => release !== undefined);
    actor.send({ type: 'steer', message: 'for the child that ended', target: 'c1' });
    actor.send({ type: 'steer', message: 'for no call at all', target: 'zz/q1' });
    expect(rejected).toMatchObject([
      { event: 'steer', reason: expect.stringContaining("call 'c1'") },
      { event: 'steer', reason: expect.stringContaining("call 'zz'") },
    ]);
    release();
    await until(() => actor.getSnapshot().value === 'Idle');
    expect(users).toEqual([['go']]);
    actor.stop();
  });
});
