/**
 * The MCP server host of the conformance matrix: the scenario's agent served by
 * `createMcpServer` (loopchart/mcp-server) on a `MemorySessionStore`, called by the MCP SDK's own
 * `Client` over the SDK's in-memory transport, as an editor calls a tool. Approvals are asked of
 * the client through form elicitation and answered with the scenario's answer; a cancel is the
 * client's (`notifications/cancelled`, from the call's abort signal); a steer is a second call
 * naming the running session, which the server refuses (recorded in `refusals`). The result is
 * read back from the store (the session the call ran in), and the tool result the client got must
 * agree with it: the same session, the same outcome, and a Completed run's text as its content.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { ElicitRequestSchema, McpError, type CallToolResult, type ElicitResult } from '@modelcontextprotocol/sdk/types.js';
import { expect } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { ApprovalRequest } from '../../../src/agent/approvals/approval-binding.js';
import { createMcpServer, OUTCOME_META, SESSION_ID_META, type AgentMcpServer } from '../../../src/mcp-server.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';
import { failureSink, freshSessionId, storedContext, storedResult, Unsupported, type HostDriver, type OnWait } from './hosts.js';
import type { RunResult } from './scenarios.js';

const TOOL = 'agent';
/** The server's question for an approval (src/mcp-server/server.ts), read back into the call it asks about. */
const APPROVAL_QUESTION = /^Allow the agent to call (\S+) with ([\s\S]*)\?$/;

/** The client's elicitation handler: an approval answered with the scenario's answer, anything else a failure of the cell. */
function elicitation(onWait: OnWait, fail: (error: unknown) => void): (message: string) => ElicitResult {
  return (message) => {
    const asked = APPROVAL_QUESTION.exec(message);
    if (!asked) {
      const error = new Unsupported(`the server asked what the scenario does not answer through a yes/no form: ${message}`);
      fail(error);
      throw error;
    }
    const request = { toolName: asked[1]!, args: JSON.parse(asked[2]!) as unknown } as ApprovalRequest;
    const answer = onWait({ kind: 'approval', request });
    if (!('approve' in answer)) throw new Error(`the script answered ${JSON.stringify(answer)} to an approval`);
    return { action: 'accept', content: { approve: answer.approve } };
  };
}

export function mcpHost(): HostDriver {
  const store = new MemorySessionStore();
  // The session named by the client: a steer names it again while the first call runs.
  const name = freshSessionId('mcp');
  const abort = new AbortController();
  const refusals: string[] = [];
  const progress: string[] = [];
  const { failed, fail } = failureSink();
  let server: AgentMcpServer | undefined;
  let client: Client | undefined;
  let call: Promise<CallToolResult> | undefined;
  const callTool = (task: string, signal?: AbortSignal) =>
    client!.callTool({ name: TOOL, arguments: { task }, _meta: { [SESSION_ID_META]: name } }, undefined, { timeout: 20_000, onprogress: (p) => progress.push(p.message ?? ''), ...(signal && { signal }) }) as Promise<CallToolResult>;
  return {
    async start(config, prompt, onWait) {
      // An agent with an answer's schema is served with it as the tool's outputSchema, as an application would.
      const output = config.output instanceof z.ZodType ? { output: config.output } : {};
      server = createMcpServer({ agents: [{ agent: createAgentMachine(config), name: TOOL, description: 'The scenario’s agent.', ...output }], store });
      const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
      await server.connect(serverSide);
      client = new Client({ name: 'matrix', version: '1' }, { capabilities: { elicitation: { form: {} } } });
      const answer = elicitation(onWait, fail);
      client.setRequestHandler(ElicitRequestSchema, (request) => answer(request.params.message));
      await client.connect(clientSide);
      call = callTool(prompt, abort.signal);
      call.catch(() => {});
    },
    async steer(message) {
      // MCP has no message into a running call; the nearest a client can do is call again on the session.
      const second = await callTool(message).catch((error: unknown) => error);
      if (!(second instanceof McpError)) throw new Error(`the server took a second call on the running session: ${JSON.stringify(second)}`);
      refusals.push(second.message);
    },
    async cancel() {
      // The SDK sends notifications/cancelled and forgets it: the cancel is taken once the server's call has ended.
      abort.abort();
      for (let i = 0; i < 500 && server!.stats().running > 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    },
    crash: async () => {
      throw new Unsupported('not in one process: test/mcp-server/in-doubt.process.test.ts restarts a real server');
    },
    async result() {
      const got = await Promise.race([call!.catch((error: unknown) => error), failed]);
      const stored = (await store.list()).map((s) => s.sessionId);
      // The call's session, not a subagent's beside it (`<parent>/run-…`).
      const ids = stored.filter((id) => id.startsWith(`mcp/${TOOL}/`) && !stored.some((parent) => id.startsWith(`${parent}/`)));
      if (ids.length !== 1) throw new Error(`the store holds ${ids.length} sessions of the tool: ${ids.join(', ')}`);
      const sessionId = ids[0]!;
      const result: RunResult = { ...storedResult(await storedContext(store, sessionId)), refusals };
      // The call the client cancelled has no result of its own: the run ended in the store.
      if (abort.signal.aborted) return result;
      if (got instanceof Error) throw got;
      const tool = got as CallToolResult;
      const outcome = result.outcome.type;
      if (tool._meta?.[SESSION_ID_META] !== sessionId || tool._meta?.[OUTCOME_META] !== outcome) {
        throw new Error(`the client got ${JSON.stringify(tool._meta)}, the store holds ${sessionId} ended ${outcome}`);
      }
      if ((tool.isError === true) !== (outcome !== 'Completed')) throw new Error(`the client got isError ${tool.isError} for a run that ended ${outcome}`);
      // One progress notification per turn the run took, in order.
      const turns = (await storedContext(store, sessionId)).brain.context.turnsTaken;
      expect(progress).toEqual(Array.from({ length: turns }, (_, i) => `turn ${i + 1} finished`));
      if (result.outcome.output !== undefined) expect(tool.structuredContent).toEqual(result.outcome.output);
      // What the client reads as the answer.
      return outcome === 'Completed' ? { ...result, text: (tool.content[0] as { text: string }).text } : result;
    },
    async dispose() {
      abort.abort();
      await client?.close().catch(() => {});
      await server?.close();
    },
  };
}
