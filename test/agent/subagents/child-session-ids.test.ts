/**
 * A subagent's session id (`<parent>/run-<n>:turn-<n>:<call id>`) is made only by its parent's
 * call: `DurableSession.open` refuses to create one, so nobody can plant a session under it
 * beforehand for the parent's call to take as its child (before, a parent's call adopted such a
 * session and answered with what it held, its child model never called). Opening one that exists
 * (a child the parent made) still works, for reads and decisions.
 */
import { describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { agentTool } from '../../../src/agent/subagents/agent-tool.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { InvalidSessionIdError } from '../../../src/stores/errors.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';

describe("a subagent's session id", () => {
  it("cannot be made beforehand by anyone but the parent's call; the call makes its own child", async () => {
    const store = new MemorySessionStore();
    const planted = createAgentMachine({ model: scriptedModel([{ text: 'FOREIGN SECRET from another user' }]) });
    await expect(DurableSession.open({ machine: planted, store, sessionId: 'acme/run-1:turn-1:c1' })).rejects.toThrow(InvalidSessionIdError);
    expect(await store.load('acme/run-1:turn-1:c1')).toBeUndefined();

    let childCalls = 0;
    const worker = createAgentMachine({ model: scriptedModel([() => (childCalls++, { text: 'the real answer' })]) });
    const parent = createAgentMachine({
      model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'work', args: { task: 'Do it.' } }] }, (request) => ({ text: `got: ${String(request.messages.at(-1)!.content)}` })]),
      tools: [agentTool({ agent: worker, name: 'work', description: 'Works.' })],
    });
    const session = await DurableSession.open({ machine: parent, store, sessionId: 'acme' });
    session.send({ type: 'input', message: 'Go.' });
    expect((await session.whenIdle())?.outcome).toMatchObject({ type: 'Completed', finalText: 'got: the real answer' });
    expect(childCalls).toBe(1);
    await session.close();
    // The child the call made opens like any stored session (at rest: nothing to create).
    const child = await DurableSession.open({ machine: worker, store, sessionId: 'acme/run-1:turn-1:c1' });
    expect(child.actor.getSnapshot().context.lastRun?.outcome).toMatchObject({ type: 'Completed', finalText: 'the real answer' });
    await child.close();
  });
});
