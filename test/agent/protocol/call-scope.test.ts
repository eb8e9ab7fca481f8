/**
 * A tool call's scope (who its parent is, whether it runs an agent) travels in an async context.
 * Only a call that runs an agent, or one inside such a call, enters one: a plain tool of a
 * top-level agent runs as it is, so a process whose agents call no agent tool never turns on
 * async context tracking (on Node 20, promise hooks every promise then pays). A child agent's own
 * tool still gets a scope of its own, so it never reads its parent's.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createActor, toPromise } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { agentTool } from '../../../src/agent/subagents/agent-tool.js';
import { currentScope, type RunScope } from '../../../src/agent/protocol/call-scope.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { defineTool } from '../../../src/tools/define-tool.js';

/** A plain tool that records the scope it runs in. */
function probe(seen: (RunScope | undefined)[]) {
  return defineTool({ name: 'probe', description: 'Looks around.', input: z.object({}), execute: () => (seen.push(currentScope()), 'looked') });
}

const calls = (name: string, id: string) => ({ toolCalls: [{ id, name, args: name === 'probe' ? {} : { task: 'look' } }] });

afterEach(() => vi.restoreAllMocks());

describe('the scope of a tool call', () => {
  it('a plain tool of a top-level agent runs in no async context at all', async () => {
    const run = vi.spyOn(AsyncLocalStorage.prototype, 'run');
    const seen: (RunScope | undefined)[] = [];
    const machine = createAgentMachine({ model: scriptedModel([calls('probe', 'p1'), { text: 'done' }]), tools: [probe(seen)] });
    const output = await toPromise(createActor(machine, { input: { prompt: 'go' } }).start());
    expect(output.outcome.type).toBe('Completed');
    expect(seen).toEqual([undefined]);
    expect(run).not.toHaveBeenCalled();
  });

  it("a child agent's plain tool runs in its own scope, not its parent's agent-tool scope", async () => {
    const seen: (RunScope | undefined)[] = [];
    const child = createAgentMachine({ model: scriptedModel([calls('probe', 'p1'), { text: 'found' }]), tools: [probe(seen)] });
    const parent = createAgentMachine({
      model: scriptedModel([calls('research', 'c1'), { text: 'done' }]),
      tools: [agentTool({ agent: child, name: 'research', description: 'Researches.' })],
    });
    const output = await toPromise(createActor(parent, { input: { sessionId: 'boss', prompt: 'go' } }).start());
    expect(output.outcome).toMatchObject({ type: 'Completed', finalText: 'done' });
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ callId: 'p1', runsAgent: false, depth: 1 });
  });
});
