/**
 * A model names its calls, and a name may hold a '/': the coordinator's `research` call is `a/b`,
 * so the page shows its child's `transfer` call as `a/b/p1`. The page's answer with that id runs
 * the child's call, decided down the tree stored in a SQLite file (the run waits at rest once the
 * response ended), by the same handler and by a second one after the first closed. Before, both
 * routed `a/b/p1` to a call `a` the run has not and answered 409 ApprovalNotFound.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createChatHandler, type ChatHandler } from '../../src/http.js';
import { agentTool, createAgentMachine, defineTool, type ModelRequest } from '../../src/index.js';
import { scriptedModel } from '../../src/testing.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { loadSdk, page, userMessage, answered } from './support.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-slash-ids-'));
const handlers: ChatHandler[] = [];
afterEach(async () => {
  await Promise.all(handlers.splice(0).map((handler) => handler.close()));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Answers from the conversation, so a second handler's model goes on where the first stopped. */
const afterTool = (first: { text: string; toolCalls: { id: string; name: string; args: unknown }[] }, then: string) =>
  scriptedModel(Array.from({ length: 4 }, () => (request: ModelRequest) => (request.messages.at(-1)!.role === 'tool' ? { text: then } : first)));

/** The coordinator calls `research` (an agent) as call `a/b`; its child calls `transfer` (needs approval) as `p1`. */
function team() {
  const transfers: string[] = [];
  const transfer = defineTool({
    name: 'transfer',
    description: 'Move money (asks a human first).',
    input: z.object({ amount: z.number() }),
    needsApproval: true,
    execute: ({ amount }) => (transfers.push(String(amount)), `sent ${amount}`),
  });
  const worker = createAgentMachine({ model: afterTool({ text: 'Checking.', toolCalls: [{ id: 'p1', name: 'transfer', args: { amount: 5 } }] }, 'Worker sent it.'), tools: [transfer] });
  const machine = createAgentMachine({
    model: afterTool({ text: 'Asking research.', toolCalls: [{ id: 'a/b', name: 'research', args: { task: 'send 5' } }] }, 'All done.'),
    tools: [agentTool({ agent: worker, name: 'research', description: 'Researches.' })],
  });
  return { machine, transfers };
}


const within = <T>(promise: Promise<T>, ms: number): Promise<T> =>
  Promise.race([promise, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`not settled within ${ms} ms`)), ms))]);

describe("a subagent's call under a call whose id holds '/'", () => {
  it.each(['the same handler', 'a second handler'] as const)('%s: the page answers it by the id shown (a/b/p1); its tool runs and the run completes', async (when) => {
    const store = new SqliteSessionStore({ path: join(root, `${when.replaceAll(' ', '-')}.db`) });
    try {
      const first = team();
      const handler = createChatHandler({ machine: first.machine, store, aiSdk: 6 });
      handlers.push(handler);
      const sdk = await loadSdk(6);
      const user = userMessage('Send 5 through research.');
      const asked = await within(page(sdk, handler, 'slash').send([user]), 5000);
      expect(asked.metadata?.outcome).toBe('waiting');
      expect(asked.parts.find((p) => p.state === 'approval-requested')).toMatchObject({ toolCallId: 'a/b/p1', type: 'tool-transfer' });

      let answering = handler;
      let transfers = first.transfers;
      if (when === 'a second handler') {
        await handler.close();
        const second = team();
        answering = createChatHandler({ machine: second.machine, store, aiSdk: 6 });
        handlers.push(answering);
        transfers = second.transfers;
      }
      const chat = page(sdk, answering, 'slash');
      // Before: the transport threw the 409 ApprovalNotFound ("no call 'a/b/p1' of run 1 as shown waits for a decision").
      const after = await within(chat.send([user, answered(asked, true)], answered(asked, true)), 5000);
      expect(chat.errors).toEqual([]);
      expect(transfers).toEqual(['5']);
      expect(after.parts.find((p) => p.toolCallId === 'a/b/p1')).toMatchObject({ state: 'output-available', output: 'sent 5' });
      expect(after.metadata?.outcome).toBe('Completed');
    } finally {
      await Promise.all(handlers.splice(0).map((handler) => handler.close()));
      await store.close();
    }
  });
});
