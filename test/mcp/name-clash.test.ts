/**
 * A tool name an MCP server lists that the agent already has (one of its own tools, or another
 * source's): the run's listing fails with a DuplicateToolError that says who gives the name, so
 * the fix (a prefix) is plain; no tool silently hides another.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createActor, toPromise } from 'xstate';
import { z } from 'zod';
import { createAgentMachine, defineTool } from '../../src/index.js';
import { mcpTools, type McpTools } from '../../src/mcp.js';
import { scriptedModel } from '../../src/testing.js';
import { fixtureServer } from './support.js';

const handles: McpTools[] = [];
afterEach(async () => {
  await Promise.all(handles.splice(0).map((handle) => handle.close()));
});
const open = async (...args: Parameters<typeof mcpTools>) => {
  const handle = await mcpTools(...args);
  handles.push(handle);
  return handle;
};
const echo = defineTool({ name: 'echo', description: 'Our own echo.', input: z.object({ text: z.string() }), execute: ({ text }) => text });

async function failure(config: Parameters<typeof createAgentMachine>[0]) {
  const output = await toPromise(createActor(createAgentMachine(config), { input: { prompt: 'hi' } }).start());
  expect(output.outcome.type).toBe('Failed');
  return (output.outcome as { error: { message: string } }).error.message;
}

describe('a listed tool name the agent already has', () => {
  it("one of the agent's own tools: the run fails naming the tool, the server and the agent's tool, with the fix", async () => {
    const fixture = await open(fixtureServer());
    const message = await failure({ model: scriptedModel([{ text: 'never' }]), tools: [echo], toolSources: [fixture] });
    expect(message).toBe(
      `tool name "echo" is used by more than one tool: listed by tool source 'fixture' and one of the agent's own tools; give the source's tools a prefix (mcpTools' prefix option)`,
    );
  });

  it("another server's tool: the run fails naming both servers; a prefix on one of them ends the clash", async () => {
    const first = await open(fixtureServer(), { name: 'first' });
    const second = await open(fixtureServer(), { name: 'second' });
    const message = await failure({ model: scriptedModel([{ text: 'never' }]), toolSources: [first, second] });
    expect(message).toMatch(/^tool name "echo" is used by more than one tool: listed by tool source 'second' and by tool source 'first'; give the source's tools a prefix/);
    const prefixed = await open(fixtureServer(), { prefix: 'two_' });
    const model = scriptedModel([{ toolCalls: [{ id: '1', name: 'two_echo', args: { text: 'hi' } }] }, { text: 'done' }]);
    const output = await toPromise(createActor(createAgentMachine({ model, toolSources: [first, prefixed] }), { input: { prompt: 'hi' } }).start());
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
  });
});
