/**
 * A reload shows the chat's own tool calls as the live stream left them, part for part, across
 * several runs of one chat whose calls reuse their ids: a call approved then run (with the page's
 * `approval`), one denied (with its reason), one that failed, one still waiting for its approval,
 * one in doubt after the server died in it (run again, or not). The chat is driven over real HTTP
 * (`toNodeListener` on 127.0.0.1) on a real SQLite file; the live message is what each AI SDK
 * version's own readUIMessageStream built from the responses, the reload (`GET <api>/<id>/messages`)
 * and the reattach from the store (`GET <api>/<id>/stream`) are read from a second handler on
 * another connection to the same file, a process that never held the chat.
 */
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createChatHandler, toNodeListener, type ChatHandler } from '../../src/http.js';
import { createAgentMachine, defineTool, type AgentMachine } from '../../src/index.js';
import type { ScriptEntry } from '../../src/models/scripted.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { scriptedModel } from '../../src/testing.js';
import { loadSdk, nodeMajor, userMessage, type Sdk, type UIMessage, plainParts } from './support.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-chat-reload-'));
let files = 0;
const cleanup: Array<() => Promise<unknown> | void> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A handler on its own connection to the SQLite file at `path`, served on 127.0.0.1: its API URL. */
async function serve(path: string, machine: AgentMachine, version: 5 | 6 | 7): Promise<{ api: string; handler: ChatHandler }> {
  const store = new SqliteSessionStore({ path });
  const handler = createChatHandler({ machine, store, aiSdk: version });
  const server = createServer(toNodeListener(handler)).listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanup.push(async () => {
    await handler.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await store.close();
  });
  return { api: `http://127.0.0.1:${(server.address() as { port: number }).port}/api/chat`, handler };
}

type Answers = Record<string, { approved: boolean; reason?: string }>;

/** A page of one chat, talking to `api` over HTTP with the version's own transport. */
function pageOf(sdk: Sdk, api: string, chatId: string) {
  const errors: string[] = [];
  const read = async (stream: ReadableStream<unknown>, message?: UIMessage): Promise<UIMessage> => {
    let last: UIMessage | undefined;
    for await (const m of sdk.readUIMessageStream({ stream, ...(message && { message: structuredClone(message) }), onError: (e) => errors.push(String((e as Error).message ?? e)) })) last = m;
    return last!;
  };
  const sendVia = async (body: object | undefined, messages: unknown[], continuing?: UIMessage) => {
    const transport = new sdk.DefaultChatTransport({ api, fetch: globalThis.fetch, ...(body && { body }) });
    return read(await transport.sendMessages({ chatId, messages, trigger: 'submit-message', messageId: undefined, abortSignal: undefined }), continuing);
  };
  return {
    errors,
    /** Posts the page's messages (the last one new). */
    send: (messages: unknown[]) => sendVia(undefined, messages),
    /**
     * Answers the requests of `asked` (the last of `messages`, as the page holds it) by call id:
     * on the parts (`addToolApprovalResponse`, AI SDK 6 and 7), or beside the messages (5).
     */
    answer: async (before: unknown[], asked: UIMessage, answers: Answers) => {
      if (sdk.version === 5) {
        const approvals = asked.parts.flatMap((part) => {
          const data = part.data as { approvalId: string; toolCallId: string } | undefined;
          const given = part.type === 'data-approval-request' ? answers[data!.toolCallId] : undefined;
          return given ? [{ approvalId: data!.approvalId, ...given }] : [];
        });
        return sendVia({ approvals }, [...before, asked], asked);
      }
      const holds: UIMessage = {
        ...asked,
        parts: asked.parts.map((part) => {
          const given = part.state === 'approval-requested' ? answers[part.toolCallId!] : undefined;
          return given ? { ...part, state: 'approval-responded', approval: { ...part.approval!, ...given } } : part;
        }),
      };
      return sendVia(undefined, [...before, holds], holds);
    },
    /** Reattaches (`GET <api>/<id>/stream`): the message the replay builds, or null (204). */
    resume: async () => {
      const transport = new sdk.DefaultChatTransport({ api, fetch: globalThis.fetch });
      const stream = await transport.reconnectToStream({ chatId });
      return stream && read(stream);
    },
  };
}

async function reload(api: string, chatId: string): Promise<UIMessage[]> {
  const response = await fetch(`${api}/${encodeURIComponent(chatId)}/messages`);
  expect(response.status).toBe(200);
  return ((await response.json()) as { messages: UIMessage[] }).messages;
}

/** `transfer` asks first; `fail` always fails; `lookup` just answers. */
function bankTools() {
  const transfers: number[] = [];
  const transfer = defineTool({
    name: 'transfer',
    description: 'Moves money (asks first).',
    input: z.object({ amount: z.number() }),
    needsApproval: true,
    execute: ({ amount }) => (transfers.push(amount), `sent ${amount}`),
  });
  const fail = defineTool({
    name: 'fail',
    description: 'Always fails.',
    input: z.object({}),
    execute: () => {
      throw new Error('the bank is closed');
    },
  });
  const lookup = defineTool({ name: 'lookup', description: 'Finds a person.', input: z.object({ who: z.string() }), execute: ({ who }) => `found ${who}` });
  return { tools: [transfer, fail, lookup], transfers };
}

/** One run's replies: two transfers and a lookup (ids `c1` to `c3` in every run), a failing call (`c4`), an answer. */
const runOf = (n: number): ScriptEntry[] => [
  { text: `Run ${n}.`, toolCalls: [{ id: 'c1', name: 'transfer', args: { amount: 5 } }, { id: 'c2', name: 'transfer', args: { amount: 7 } }, { id: 'c3', name: 'lookup', args: { who: 'ana' } }] },
  { toolCalls: [{ id: 'c4', name: 'fail', args: {} }] },
  { text: `Run ${n} done.` },
];

/**
 * What AI SDK 6 can replay of a message the page holds (see the chat guide, Reattaching): no
 * answered part carries the page's answer, a denial is the error the model read (`errors`, by call id).
 */
const replayedIn6 = (parts: UIMessage['parts'], errors: Record<string, string>): UIMessage['parts'] =>
  parts.map((part) => {
    if (part.state === 'approval-requested') return part;
    const { approval: _, ...rest } = part;
    return rest.state === 'output-denied' ? { ...rest, state: 'output-error', errorText: errors[rest.toolCallId!]! } : rest;
  });

describe.each([5, 6, 7] as const)('AI SDK %s: a chat of several runs on SQLite, reloaded by another handler', (version) => {
  const skip = version === 7 && nodeMajor < 22;

  it.skipIf(skip)('each run shows its own calls as the live page left them: approved and run, denied, failed, waiting', async () => {
    const sdk = await loadSdk(version);
    const path = join(root, `chats-${files++}.db`);
    const { tools, transfers } = bankTools();
    const script: ScriptEntry[] = [
      ...runOf(1),
      ...runOf(2),
      { text: 'Run 3.', toolCalls: [{ id: 'c1', name: 'transfer', args: { amount: 5 } }] },
      { toolCalls: [{ id: 'c2', name: 'transfer', args: { amount: 7 } }] },
      { text: 'Run 3 done.' },
    ];
    const machine = createAgentMachine({ model: scriptedModel(script), tools });
    const live = await serve(path, machine, version);
    const chat = pageOf(sdk, live.api, 'bank');
    const [u1, u2, u3] = [userMessage('First.', 'u1'), userMessage('Second.', 'u2'), userMessage('Third.', 'u3')];
    // Run 1: the page approves c1 and denies c2 with a reason; run 2 the other way round, no reason.
    const run1 = await chat.answer([u1], await chat.send([u1]), { c1: { approved: true }, c2: { approved: false, reason: 'Not 7.' } });
    const run2 = await chat.answer([u1, run1, u2], await chat.send([u1, run1, u2]), { c1: { approved: false }, c2: { approved: true } });
    // Run 3: c1 approved and run, then c2 waits.
    const asked3 = await chat.send([u1, run1, u2, run2, u3]);
    const waiting = await chat.answer([u1, run1, u2, run2, u3], asked3, { c1: { approved: true } });
    expect(chat.errors).toEqual([]);
    expect([run1.metadata?.outcome, run2.metadata?.outcome, waiting.metadata?.outcome]).toEqual(['Completed', 'Completed', 'waiting']);
    expect(transfers).toEqual([5, 7, 5]);
    if (version !== 5) {
      expect(run1.parts.find((p) => p.toolCallId === 'c1')).toMatchObject({ state: 'output-available', approval: { approved: true } });
      expect(waiting.parts.find((p) => p.toolCallId === 'c2')).toMatchObject({ state: 'approval-requested' });
    }

    const other = await serve(path, machine, version);
    const stored = await reload(other.api, 'bank');
    expect(stored.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user']);
    expect(plainParts(stored[1]!.parts)).toEqual(plainParts(run1.parts));
    expect(plainParts(stored[3]!.parts)).toEqual(plainParts(run2.parts));
    await expect(sdk.validateUIMessages({ messages: stored })).resolves.toBeDefined();
    // The run in flight, reattached from the store: as the page was shown it (AI SDK 6 cannot replay the page's answer).
    const reattached = pageOf(sdk, other.api, 'bank');
    const replay = (await reattached.resume())!;
    expect(reattached.errors).toEqual([]);
    expect(replay.metadata?.outcome).toBe('waiting');
    expect(plainParts(replay.parts)).toEqual(plainParts(version === 6 ? replayedIn6(waiting.parts, {}) : waiting.parts));

    const run3 = await chat.answer([u1, run1, u2, run2, u3], waiting, { c2: { approved: false, reason: 'Not twice.' } });
    expect([chat.errors, run3.metadata?.outcome]).toEqual([[], 'Completed']);
    const after = await reload((await serve(path, machine, version)).api, 'bank');
    expect(after.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user', 'assistant']);
    expect(plainParts(after[1]!.parts)).toEqual(plainParts(run1.parts));
    expect(plainParts(after[3]!.parts)).toEqual(plainParts(run2.parts));
    expect(plainParts(after[5]!.parts)).toEqual(plainParts(run3.parts));
    await expect(sdk.validateUIMessages({ messages: after })).resolves.toBeDefined();
  });

  it.skipIf(skip).each([
    ['run again', false, { approved: true }],
    ['not run again, with a reason', false, { approved: false, reason: 'It went through.' }],
    ['not run again, without a reason', false, { approved: false }],
    ['approved first, then run again', true, { approved: true }],
    ['approved first, then not run again', true, { approved: false, reason: 'It went through.' }],
  ] as const)('a call in doubt after the server died in it, %s: the page that comes back is asked, the reload is the live message', async (_, approvalFirst, given) => {
    const sdk = await loadSdk(version);
    const path = join(root, `chats-${files++}.db`);
    const charges: number[] = [];
    const charge = defineTool({
      name: 'charge',
      description: 'Charges the card.',
      input: z.object({ amount: z.number() }),
      inDoubt: 'ask',
      needsApproval: approvalFirst,
      execute: ({ amount }, ctx) => {
        charges.push(amount);
        // The first run never returns: the server dies in it.
        if (charges.length === 1) return new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));
        return `charged ${amount}`;
      },
    });
    const script: ScriptEntry[] = [{ text: 'Earlier.', toolCalls: [{ id: 'c1', name: 'lookup', args: { who: 'bo' } }] }, { text: 'Found.' }, { text: 'Charging.', toolCalls: [{ id: 'c1', name: 'charge', args: { amount: 5 } }] }, { text: 'Done.' }];
    const machine = createAgentMachine({ model: scriptedModel(script), retry: false, tools: [charge, ...bankTools().tools] });
    const first = await serve(path, machine, version);
    const [u1, u2] = [userMessage('Find Bo.', 'u1'), userMessage('Charge 5.', 'u2')];
    const before = pageOf(sdk, first.api, 'pay');
    const earlier = await before.send([u1]);
    const cut = approvalFirst ? before.answer([u1, earlier, u2], await before.send([u1, earlier, u2]), { c1: { approved: true } }) : before.send([u1, earlier, u2]);
    for (let i = 0; i < 400 && charges.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(charges).toEqual([5]);
    await first.handler.close();
    await cut;
    // The page comes back to another server: it asks whether to run the call again.
    const second = await serve(path, machine, version);
    const chat = pageOf(sdk, second.api, 'pay');
    const asked = (await chat.resume())!;
    expect(asked.parts.some((p) => p.type === 'data-tool-in-doubt')).toBe(true);
    // Asked whether to run it again, also when the page approved it before (AI SDK 6 withholds only the question answered).
    if (version !== 5) expect(asked.parts.find((p) => p.toolCallId === 'c1')).toMatchObject({ state: 'approval-requested' });
    const live = await chat.answer([u1, earlier, u2], asked, { c1: given });
    expect([chat.errors, live.metadata?.outcome]).toEqual([[], 'Completed']);
    expect(charges).toEqual(given.approved ? [5, 5] : [5]);
    // Shown with the answer that decided its result, the last: not run again is a denial, whatever was approved before.
    if (version !== 5 && !given.approved) expect(live.parts.find((p) => p.toolCallId === 'c1')).toMatchObject({ state: 'output-denied', approval: { approved: false } });
    const stored = await reload((await serve(path, machine, version)).api, 'pay');
    expect(stored.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    expect(plainParts(stored[1]!.parts)).toEqual(plainParts(earlier.parts));
    expect(plainParts(stored[3]!.parts)).toEqual(plainParts(live.parts));
    await expect(sdk.validateUIMessages({ messages: stored })).resolves.toBeDefined();
  });
});
