/**
 * A server whose tool list changes between runs: given as a tool source, the handle is listed
 * again at the next run's start, so the model is offered the new tools and the runner runs them.
 * Given as a fixed `tools` list, the agent keeps the list it was built with.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createActor, waitFor } from 'xstate';
import { AgentStepper, createAgentMachine, type AgentActor, type AgentConfig, type ModelRequest } from '../../src/index.js';
import { mcpTools, McpServerError, type McpTools } from '../../src/mcp.js';
import { scriptedModel } from '../../src/testing.js';
import { fixtureServer } from './support.js';

let handle: McpTools | undefined;
let other: McpTools | undefined;
afterEach(async () => {
  await handle?.close();
  await other?.close();
  handle = other = undefined;
});

/** Two runs on one actor: the first grows the server's list, the second asks for the new tool if it was offered. */
async function twoRuns(config: (mcp: McpTools) => Partial<AgentConfig>) {
  const offered: string[][] = [];
  const answerLate = (request: ModelRequest) => {
    offered.push(request.tools.map((tool) => tool.name));
    return request.tools.some((tool) => tool.name === 'late')
      ? { toolCalls: [{ id: 'l', name: 'late', args: {} }] }
      : { text: 'no late tool' };
  };
  const model = scriptedModel([
    (request) => (offered.push(request.tools.map((tool) => tool.name)), { toolCalls: [{ id: 'g', name: 'grow', args: {} }] }),
    { text: 'grown' },
    answerLate,
    { text: 'used late' },
  ]);
  handle = await mcpTools(fixtureServer());
  const actor: AgentActor = createActor(createAgentMachine({ model, ...config(handle) }), { input: { sessionId: 'relist' } }).start();
  const runs: string[] = [];
  for (const prompt of ['grow the list', 'use the new tool']) {
    const before = actor.getSnapshot().context.runIndex;
    actor.send({ type: 'input', message: prompt });
    const done = await waitFor(actor, (s) => s.context.runIndex > before && s.matches('Idle'), { timeout: 10_000 });
    const outcome = done.context.lastRun!.outcome;
    runs.push(outcome.type === 'Completed' ? outcome.finalText : outcome.type);
  }
  actor.stop();
  return { offered, runs, messages: actor.getSnapshot().context.brain.context.history };
}

describe('a server whose tools change between runs', () => {
  it('as a tool source: listed again at the next run, whose model is offered the new tool and may call it', async () => {
    const { offered, runs, messages } = await twoRuns((mcp) => ({ toolSources: [mcp] }));
    expect(offered[0]).not.toContain('late');
    expect(offered[1]).toContain('late');
    expect(runs).toEqual(['grown', 'used late']);
    expect(messages.find((m) => m.role === 'tool' && m.toolCallId === 'l')).toMatchObject({ content: 'late answer' });
    expect(handle!.tools.map((tool) => tool.name)).toContain('late');
  });

  it('as a fixed list: the agent keeps the tools it was built with', async () => {
    const { offered, runs } = await twoRuns((mcp) => ({ tools: mcp.tools }));
    expect(offered[1]).not.toContain('late');
    expect(runs).toEqual(['grown', 'no late tool']);
  });

  it('a server that is gone at a run start fails that run with McpServerError, naming the server', async () => {
    handle = await mcpTools(fixtureServer());
    const model = scriptedModel([{ toolCalls: [{ id: 'c', name: 'crash', args: {} }] }, { text: 'after the crash' }, { text: 'never' }]);
    const actor = createActor(createAgentMachine({ model, toolSources: [handle] }), { input: { sessionId: 'gone' } }).start();
    actor.send({ type: 'input', message: 'crash it' });
    let done = await waitFor(actor, (s) => s.context.runIndex === 1 && s.matches('Idle'), { timeout: 10_000 });
    expect(done.context.lastRun!.outcome).toEqual({ type: 'Completed', finalText: 'after the crash' });
    actor.send({ type: 'input', message: 'again' });
    done = await waitFor(actor, (s) => s.context.runIndex === 2 && s.matches('Idle'), { timeout: 10_000 });
    const outcome = done.context.lastRun!.outcome;
    expect(outcome.type).toBe('Failed');
    expect(outcome.type === 'Failed' && outcome.error.message).toMatch(/MCP server .*server\.mjs.*not running/);
    actor.stop();
    await expect(handle.listTools()).rejects.toSatisfy((error) => McpServerError.isInstance(error));
  });

  it('a run recorded its tools: continued by another agent whose server no longer lists one, the call still reaches the server by name', async () => {
    const offered: string[][] = [];
    const model = scriptedModel([
      (request) => (offered.push(request.tools.map((tool) => tool.name)), { toolCalls: [{ id: 'e', name: 'echo', args: { text: 'hi' } }] }),
      (request) => (offered.push(request.tools.map((tool) => tool.name)), { text: 'echoed' }),
    ]);
    handle = await mcpTools(fixtureServer());
    const first = new AgentStepper(createAgentMachine({ model, toolSources: [handle] }), { input: { prompt: 'echo hi', sessionId: 'moved' } });
    // Its toolset step and its model step, stored as plain JSON.
    for (let i = 0; i < 2; i++) first.apply((await first.step()).effects);
    const stored = JSON.parse(JSON.stringify(first.session));
    // Another process, another connection: this server's listing leaves `echo` out.
    other = await mcpTools(fixtureServer({ MCP_FIXTURE_HIDE: 'echo' }));
    expect(other.tools.map((tool) => tool.name)).not.toContain('echo');
    const elsewhere = new AgentStepper(createAgentMachine({ model, toolSources: [other] }), { session: stored });
    for (let i = 0; i < 20 && elsewhere.status() === 'continues'; i++) elsewhere.apply((await elsewhere.step()).effects);
    expect(elsewhere.status()).toBe('finished');
    expect(offered[1]).toEqual(offered[0]);
    expect(offered[1]).toContain('echo');
    const history = (elsewhere.session as unknown as { context: { brain: { context: { history: { role: string; content: string }[] } } } }).context.brain.context.history;
    expect(history.find((m) => m.role === 'tool')).toMatchObject({ content: 'echo: hi' });
  });
});
