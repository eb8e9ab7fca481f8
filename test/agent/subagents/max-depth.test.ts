/**
 * Agents inside agents have a depth limit: an agent tool's child may run at most `maxDepth`
 * levels below the top-level agent (default 5). An agent that calls itself is stopped there with
 * a `SubagentDepthError` naming the depth, as an error result its parent reads, before any child
 * session exists. Before, it went on to depth 16, where the child's session id passed 256
 * characters ("invalid session id"), and the error said nothing about depth.
 */
import { describe, expect, it } from 'vitest';
import { agentTool, createAgentMachine, runAgent, type AgentMachine, type AgentToolOptions, type Model, type ToolMessage } from '../../../src/index.js';
import { DEFAULT_MAX_SUBAGENT_DEPTH } from '../../../src/schemas-entry.js';
import { openSessionStore } from '../../../src/stores/open.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';

/** A model that delegates to `self` until a tool result comes back, then answers with that result. */
function delegating(): { model: Model; calls: { count: number } } {
  const calls = { count: 0 };
  const model: Model = {
    name: 'delegator',
    generate: async ({ messages }) => {
      calls.count++;
      const last = messages.at(-1)!;
      if (last.role === 'tool') return { message: { role: 'assistant', content: `below: ${last.content}` }, finishReason: 'stop' };
      return { message: { role: 'assistant', content: '', toolCalls: [{ id: `c${calls.count}`, name: 'self', args: { task: 'go deeper' } }] }, finishReason: 'tool-calls' };
    },
  };
  return { model, calls };
}

/** An agent whose one tool is itself (the tool reads its agent when called). */
function selfCalling(extra: Partial<AgentToolOptions> = {}) {
  const { model, calls } = delegating();
  const options = { name: 'self', description: 'Delegates to itself.', agent: undefined as unknown as AgentMachine, ...extra };
  const machine = createAgentMachine({ model, tools: [agentTool(options)] });
  options.agent = machine;
  return { machine, model, calls };
}

/** The innermost error result: the tool result text, read through every level's answer. */
const resultText = (messages: readonly { role: string }[]) => (messages.find((m): m is ToolMessage => m.role === 'tool')!).content;

describe('subagent depth', () => {
  it('an agent that calls itself stops at the default depth with an error naming it; no deeper child starts', async () => {
    const { machine, model, calls } = selfCalling();
    const result = await runAgent({ model, tools: [agentTool({ name: 'self', description: 'Delegates.', agent: machine })], prompt: 'Go.' });
    expect(result.outcome.type).toBe('Completed');
    const text = resultText(result.messages);
    expect(text).toContain(`would run at depth ${DEFAULT_MAX_SUBAGENT_DEPTH + 1} of the tree of agents, past its maxDepth ${DEFAULT_MAX_SUBAGENT_DEPTH}`);
    // The top-level run and 5 levels of children: each asks once and answers once; the refused 6th level never asks.
    expect(calls.count).toBe(2 * (DEFAULT_MAX_SUBAGENT_DEPTH + 1));
  });

  it('maxDepth sets the limit; the error is SubagentDepthError with depth and maxDepth', async () => {
    const { model, machine, calls } = selfCalling({ maxDepth: 2 });
    const result = await runAgent({ model, tools: [agentTool({ name: 'self', description: 'Delegates.', agent: machine, maxDepth: 2 })], prompt: 'Go.' });
    expect(resultText(result.messages)).toContain('would run at depth 3 of the tree of agents, past its maxDepth 2');
    expect(calls.count).toBe(6);
  });

  it('under a DurableSession no child session is created past the limit', async () => {
    const { machine } = selfCalling({ maxDepth: 2 });
    const store = await openSessionStore('memory:');
    try {
      const session = await DurableSession.open({ machine, store, sessionId: 'user/42' });
      session.send({ type: 'input', message: 'Go.' });
      const output = await session.whenIdle();
      expect(output?.outcome).toMatchObject({ type: 'Completed' });
      await session.close();
      // The top-level session and its two levels of children, none deeper (a '/' in the user's id does not count as depth).
      expect(await store.list()).toHaveLength(3);
    } finally {
      await store.close();
    }
  });

  it('maxDepth must be a whole number >= 1', () => {
    const { machine } = selfCalling();
    expect(() => agentTool({ name: 'self', description: 'x', agent: machine, maxDepth: 0 })).toThrow(/maxDepth must be a whole number >= 1/);
  });

  it('an agent that is no agent, or a prompt that is no function, is refused when the tool is made', () => {
    // Before: both were accepted when the tool was made.
    const { machine } = selfCalling();
    expect(() => agentTool({ name: 'sub', description: 'x', agent: 'x' as never })).toThrow(/agent must be an agent/);
    expect(() => agentTool({ name: 'sub', description: 'x', agent: {} as never })).toThrow(/agent must be an agent/);
    expect(() => agentTool({ name: 'sub', description: 'x', agent: machine, prompt: 'x' as never })).toThrow(/prompt must be a function/);
  });
});
