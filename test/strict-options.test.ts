/**
 * Strict options (issue 41 #6): every options object a user passes is checked, and an unknown key
 * is the API's typed options error naming the closest known key. One module says what is close
 * (src/known-keys.ts); every API below uses it.
 */
import { MockLanguageModelV2 } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../machines/agent.machine.js';
import { agentTool } from '../src/agent/subagents/agent-tool.js';
import { AgentStepper } from '../src/agent/hosts/stepper.js';
import { runAgent, streamAgent } from '../src/agent/hosts/run-agent.js';
import { InvalidConfigError, type LoopchartError } from '../src/errors.js';
import { ChatHandlerOptionsError, createChatHandler } from '../src/http/chat-handler.js';
import { mcpTools } from '../src/mcp/client.js';
import { aiSdkModel } from '../src/models/ai-sdk.js';
import { openAICompatibleModel } from '../src/models/openai-compatible.js';
import { scriptedModel } from '../src/models/scripted.js';
import { closestName, parseOptions, unknownOptionMessage } from '../src/known-keys.js';
import { DurableSession } from '../src/sessions/durable-session.js';
import { MemorySessionStore } from '../src/stores/memory.js';
import { PostgresSessionStore } from '../src/stores/postgres.js';
import { SqliteSessionStore } from '../src/stores/sqlite.js';
import { defineTool } from '../src/tools/define-tool.js';
import { InvalidToolError } from '../src/tools/errors.js';
import { viewerInspector } from '../src/viewer/inspector.js';
import { startViewer } from '../src/viewer/server.js';
import { ViewerOptionsError } from '../src/viewer/sse.js';

/** The error `run` throws (or the promise it returns rejects with), for its class and message. */
async function refusal(run: () => unknown): Promise<LoopchartError> {
  try {
    await run();
  } catch (error) {
    return error as LoopchartError;
  }
  throw new Error('nothing was refused');
}

const suggests = (key: string, known: string) => new RegExp(`unknown option "${key}" — did you mean "${known}"\\?`);
const model = scriptedModel([{ text: 'hi' }]);
const echo = defineTool({ name: 'echo', description: 'Echoes.', input: z.object({ text: z.string() }), execute: ({ text }) => text });

describe('the closest known name', () => {
  it('is found case-insensitively, with a swap of neighbours as one edit, and only when one name is clearly closest', () => {
    expect(closestName('baseUrl', ['baseURL', 'apiKey', 'model'])).toBe('baseURL');
    expect(closestName('tols', ['tools', 'toolSources'])).toBe('tools');
    expect(closestName('mdoel', ['model', 'retry'])).toBe('model');
    // Nothing close: no guess, the message lists what there is.
    expect(closestName('colour', ['model', 'tools'])).toBeUndefined();
    expect(unknownOptionMessage('colour', ['model', 'tools'])).toBe('unknown option "colour" (known: model, tools)');
    // Two names equally close and sharing as much of their start: no guess either; a longer shared start wins a tie.
    expect(closestName('ac', ['ab', 'ad'])).toBeUndefined();
    expect(closestName('maxRetry', ['onRetry', 'maxRetries'])).toBe('maxRetries');
    // Bounded: a huge key is not compared (and is cut in the message).
    expect(closestName('x'.repeat(100_000), ['model'])).toBeUndefined();
    expect(unknownOptionMessage('x'.repeat(100_000), ['model']).length).toBeLessThan(200);
  });
});

describe('a union in options says what it expected (parseOptions)', () => {
  const schema = z.strictObject({
    mode: z.union([z.literal(false), z.strictObject({ limit: z.number().optional() })]).optional(),
    wait: z.union([z.number().int().positive(), z.literal(Number.POSITIVE_INFINITY)]).optional(),
    server: z.union([z.strictObject({ command: z.string() }), z.strictObject({ url: z.string() })]).optional(),
    failure: z.union([z.string(), z.instanceof(Error)]).optional(),
    endpoint: z.union([z.string(), z.instanceof(URL)]).optional(),
  });

  it.each([
    [{ mode: true }, 'mode: expected false or an object ({ limit }), got true'],
    [{ mode: { limt: 1 } }, 'mode: unknown option "limt" — did you mean "limit"?'],
    [{ mode: { limit: 'x' } }, 'mode.limit: Invalid input: expected number, received string'],
    [{ wait: 'soon' }, 'wait: expected a number or Infinity, got string'],
    [{ wait: -1 }, 'wait: Too small: expected number to be >0'],
    // Two branches of the value's type: which one was meant is not known, so zod's word stays.
    [{ server: { cmd: 'x' } }, 'server: Invalid input'],
    // The article goes by the sound, whatever the case: before, 'expected a string or a Error'.
    [{ failure: 1 }, 'failure: expected a string or an Error, got number'],
    [{ endpoint: 1 }, 'endpoint: expected a string or a URL, got number'],
  ])('%j (before: "Invalid input", or "Unrecognized key" with no suggestion)', (value, message) => {
    expect(() => parseOptions(schema, value, 'demo')).toThrow(InvalidConfigError);
    expect(() => parseOptions(schema, value, 'demo')).toThrow(`demo: ${message}`);
  });
});

describe('every options object is strict', () => {
  it('openAICompatibleModel: baseUrl is an InvalidConfigError naming baseURL (was a TypeError reading replace)', async () => {
    const error = await refusal(() => openAICompatibleModel({ baseUrl: 'http://127.0.0.1:1/v1', model: 'm' } as never));
    expect(InvalidConfigError.isInstance(error)).toBe(true);
    expect(error.message).toMatch(suggests('baseUrl', 'baseURL'));
    // A missing baseURL on its own is a typed error too.
    expect(InvalidConfigError.isInstance(await refusal(() => openAICompatibleModel({ model: 'm' } as never)))).toBe(true);
    expect((await refusal(() => openAICompatibleModel({ baseURL: 'http://127.0.0.1:1/v1', model: 'm', apikey: 'k' } as never))).message).toMatch(suggests('apikey', 'apiKey'));
  });

  it("aiSdkModel's options", async () => {
    const error = await refusal(() => aiSdkModel(new MockLanguageModelV2(), { readTimeout: 1000 } as never));
    expect(InvalidConfigError.isInstance(error)).toBe(true);
    expect(error.message).toMatch(suggests('readTimeout', 'readTimeoutMs'));
  });

  it('defineTool: a defined tool spread into a new one is taken (its definition is rebuilt, not an unknown option)', () => {
    const add = defineTool({ name: 'add', description: 'Adds.', input: z.object({ a: z.number() }), execute: ({ a }) => a });
    const traced = defineTool({ ...add, execute: ({ a }) => a + 1 });
    expect(traced.definition).toEqual(add.definition);
  });

  it("defineTool: the AI SDK's parameters is InvalidToolError naming input (was \"Cannot use 'in' operator ... _idmap\")", async () => {
    const error = await refusal(() => defineTool({ name: 'add', description: 'Adds.', parameters: z.object({ a: z.number() }), execute: () => 1 } as never));
    expect(InvalidToolError.isInstance(error)).toBe(true);
    expect(error.message).toMatch(suggests('parameters', 'input'));
    expect((await refusal(() => defineTool({ name: 'add', description: 'Adds.', input: z.object({}), exceute: () => 1 } as never))).message).toMatch(suggests('exceute', 'execute'));
  });

  it('the agent config, and the objects inside it (handoffs and their agents, budget, prices, policy, retry, pauseOnUsageLimit, guardrails, telemetry)', async () => {
    const cases: [object, RegExp][] = [
      [{ model, tool: [echo] }, suggests('tool', 'tools')],
      [{ model, instruction: 'Be brief.' }, suggests('instruction', 'instructions')],
      [{ model, handoffs: { agents: [], maxHandoff: 3 } }, suggests('maxHandoff', 'maxHandoffs')],
      [{ model, handoffs: { agents: [{ name: 'b', description: 'B.', instruction: 'x' }] } }, suggests('instruction', 'instructions')],
      [{ model, budget: { maxToken: 10 } }, suggests('maxToken', 'maxTokens')],
      [{ model, policy: { maxTurn: 3 } }, suggests('maxTurn', 'maxTurns')],
      [{ model, prices: { inputPerMillionUsd: 1, outputPerMillionUSD: 2 } }, suggests('outputPerMillionUSD', 'outputPerMillionUsd')],
      [{ model, retry: { maxRetry: 1 } }, suggests('maxRetry', 'maxRetries')],
      [{ model, pauseOnUsageLimit: { maxWait: 1000 } }, suggests('maxWait', 'maxWaitMs')],
      [{ model, guardrails: { inputs: [] } }, suggests('inputs', 'input')],
      // A problem inside a list is named with its path.
      [{ model, guardrails: { input: [{ name: 'a', check: 5 }] } }, /guardrails: input\.0\.check: check must be a function/],
      [{ model, telemetry: { recordContents: true } }, suggests('recordContents', 'recordContent')],
    ];
    for (const [config, message] of cases) {
      const error = await refusal(() => createAgentMachine(config as never));
      expect(InvalidConfigError.isInstance(error), JSON.stringify(config)).toBe(true);
      expect(error.message).toMatch(message);
    }
  });

  it('runAgent and streamAgent: the config and their own options together', async () => {
    const error = await refusal(() => runAgent({ model, promt: 'hi' } as never));
    expect(InvalidConfigError.isInstance(error)).toBe(true);
    expect(error.message).toMatch(/^.*runAgent: unknown option "promt" — did you mean "prompt"\?/);
    // Without a prompt the run could never start: refused, where it used to wait for ever.
    expect((await refusal(() => runAgent({ model } as never))).message).toMatch(/runAgent: prompt is required/);
    const streamed = await refusal(async () => {
      for await (const event of streamAgent({ model, prompt: 'hi', approveTimeout: 5 } as never)) void event;
    });
    expect(streamed.message).toMatch(/streamAgent: unknown option "approveTimeout" — did you mean "approveTimeoutMs"\?/);
  });

  it('stores: SqliteSessionStore, PostgresSessionStore (before any connection), MemorySessionStore', async () => {
    expect((await refusal(() => new SqliteSessionStore({ pth: ':memory:' } as never))).message).toMatch(suggests('pth', 'path'));
    expect((await refusal(() => new PostgresSessionStore({ connectionURL: 'postgres://127.0.0.1:1/x' } as never))).message).toMatch(/unknown option "connectionURL"/);
    expect((await refusal(() => new PostgresSessionStore({ connectionString: 'postgres://127.0.0.1:1/x', shema: 'a' } as never))).message).toMatch(suggests('shema', 'schema'));
    const memory = await refusal(() => new MemorySessionStore({ path: 'x' } as never));
    expect(InvalidConfigError.isInstance(memory)).toBe(true);
    expect(memory.message).toMatch(/MemorySessionStore takes a MemoryBacking/);
  });

  it('DurableSession.open, agentTool and AgentStepper', async () => {
    const machine = createAgentMachine({ model });
    const store = new MemorySessionStore();
    const error = await refusal(() => DurableSession.open({ machine, store, sessionID: 's' } as never));
    expect(InvalidConfigError.isInstance(error)).toBe(true);
    expect(error.message).toMatch(suggests('sessionID', 'sessionId'));
    expect((await store.list()).length).toBe(0);
    expect((await refusal(() => agentTool({ agent: machine, name: 'helper', description: 'Helps.', maxdepth: 2 } as never))).message).toMatch(suggests('maxdepth', 'maxDepth'));
    expect((await refusal(() => new AgentStepper(machine, { input: { prompt: 'x' } }, { timeout: 5 } as never))).message).toMatch(suggests('timeout', 'timeoutMs'));
    expect((await refusal(() => new AgentStepper(machine, { input: {}, sesion: 's' } as never))).message).toMatch(/AgentStepper: unknown option "sesion"/);
  });

  it("createChatHandler and the viewer's options: their own typed errors", async () => {
    const machine = createAgentMachine({ model });
    const store = new MemorySessionStore();
    const chat = await refusal(() => createChatHandler({ machine, store, allowedOrigin: ['https://a.example'] } as never));
    expect(chat).toBeInstanceOf(ChatHandlerOptionsError);
    expect(chat.message).toMatch(suggests('allowedOrigin', 'allowedOrigins'));
    expect((await refusal(() => createChatHandler({ machine, stor: store } as never))).message).toMatch(suggests('stor', 'store'));
    // A nested strict schema: the key inside `live` is named with its path.
    expect((await refusal(() => createChatHandler({ machine, store, live: { maxBufferedByte: 1 } } as never))).message).toMatch(/live: unknown option "maxBufferedByte"/);
    const viewer = await refusal(() => startViewer({ store, prot: 0 } as never));
    expect(ViewerOptionsError.isInstance(viewer)).toBe(true);
    expect(viewer.message).toMatch(suggests('prot', 'port'));
    expect((await refusal(() => viewerInspector({ maxRow: 5 } as never))).message).toMatch(suggests('maxRow', 'maxRows'));
  });

  it('mcpTools: the server and the options, before anything is started', async () => {
    const server = await refusal(() => mcpTools({ comand: 'node' } as never));
    expect(InvalidConfigError.isInstance(server)).toBe(true);
    expect(server.message).toMatch(suggests('comand', 'command'));
    expect((await refusal(() => mcpTools({ url: 'http://127.0.0.1:1/mcp', headers: {} } as never))).message).toMatch(/MCP server: unknown option "headers"/);
    expect((await refusal(() => mcpTools({ command: 'node' }, { prefx: 'fs_' } as never))).message).toMatch(suggests('prefx', 'prefix'));
  });
});

describe('the hosts that had strict schemas name the closest key too', () => {
  it('schedule, startScheduler, createMcpServer (and its agents), serveStdio and createMcpHandler', async () => {
    const { schedule } = await import('../src/schedules/schedules.js');
    const { startScheduler } = await import('../src/schedules/scheduler.js');
    const { createMcpServer } = await import('../src/mcp-server/server.js');
    const { createMcpHandler } = await import('../src/mcp-server/http.js');
    const { serveStdio } = await import('../src/mcp-server/stdio.js');
    const store = new MemorySessionStore();
    const agent = createAgentMachine({ model });
    expect((await refusal(() => schedule(store, { session: 's', agent: 'a', input: 'hi', evry: 1000 } as never))).message).toMatch(suggests('evry', 'every'));
    expect((await refusal(() => startScheduler({ store, agents: {}, leaseMS: 5 } as never))).message).toMatch(suggests('leaseMS', 'leaseMs'));
    expect((await refusal(() => startScheduler({ stor: store, agents: {} } as never))).message).toMatch(suggests('stor', 'store'));
    const entry = { agent, name: 'helper', description: 'Helps.' };
    expect((await refusal(() => createMcpServer({ agent: [entry] } as never))).message).toMatch(suggests('agent', 'agents'));
    expect((await refusal(() => createMcpServer({ agents: [{ ...entry, descripton: 'x' }] } as never))).message).toMatch(/agents\[0\]: unknown option "descripton" — did you mean "description"\?/);
    expect((await refusal(() => createMcpHandler({ agents: [entry], pth: '/mcp' } as never))).message).toMatch(suggests('pth', 'path'));
    expect((await refusal(() => serveStdio({ agents: [entry], maxMessageByte: 4096 } as never))).message).toMatch(suggests('maxMessageByte', 'maxMessageBytes'));
  });
});
