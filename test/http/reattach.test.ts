/**
 * A page that reattaches to a run in flight (`GET <api>/<id>/stream`, read with the AI SDK's own
 * readUIMessageStream) ends up with the message a page that watched the run live ended up with,
 * for calls the page answered: approved, denied (with and without a reason), a call in doubt it
 * declined to run again; a call a tool policy denied (nobody was asked) stays an error, as live.
 * Reattached in the process that runs the chat, and in another one after a restart. The
 * reattached message is one the AI SDK takes (`validateUIMessages`).
 *
 * AI SDK 7 replays the page's answer (`tool-approval-response`): the message is the live one.
 * AI SDK 6 has no chunk that carries an answer, so a replay cannot give a page the `approval`
 * its own `addToolApprovalResponse` wrote live: the replayed part has none, and a denied call,
 * which the SDK only takes as `output-denied` with that approval, shows as the error the model
 * read (`replayedIn6`). AI SDK 5 has no denied state: as live, with its approval request part.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createChatHandler, type ChatHandler } from '../../src/http.js';
import { createAgentMachine, defineTool, DurableSession, MemorySessionStore, type ToolPolicy } from '../../src/index.js';
import type { ScriptEntry } from '../../src/models/scripted.js';
import { scriptedModel } from '../../src/testing.js';
import { loadSdk, nodeMajor, page, userMessage, type Sdk, type UIMessage } from './support.js';

const handlers: ChatHandler[] = [];
const gates: Array<() => void> = [];
afterEach(async () => {
  for (const open of gates.splice(0)) open();
  await Promise.all(handlers.splice(0).map((handler) => handler.close()));
});

/** A model turn that waits until the test opens it: the run stays in flight while a page reattaches. */
function gate(text = 'Done.') {
  let open!: () => void;
  let reach!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  const reached = new Promise<void>((resolve) => (reach = resolve));
  gates.push(open);
  const entry: ScriptEntry = async () => {
    reach();
    await opened;
    return { text };
  };
  return { open, reached, entry };
}

/** `transfer` asks first; `lookup` runs unless the policy says no. */
function tools() {
  const transfer = defineTool({ name: 'transfer', description: 'Move money.', input: z.object({ amount: z.number() }), needsApproval: true, execute: ({ amount }) => `sent ${amount}` });
  const lookup = defineTool({ name: 'lookup', description: 'Looks a word up.', input: z.object({ word: z.string() }), execute: ({ word }) => `found ${word}` });
  return [transfer, lookup];
}

const noSecrets: ToolPolicy = ({ call }) => (call.name === 'lookup' ? { type: 'deny', reason: 'no lookups today' } : { type: 'allow' });

function handlerOf(version: 5 | 6 | 7, store: MemorySessionStore, script: ScriptEntry[], toolPolicy?: ToolPolicy): ChatHandler {
  const machine = createAgentMachine({ model: scriptedModel(script), retry: false, tools: tools(), ...(toolPolicy && { toolPolicy }) });
  const handler = createChatHandler({ machine, store, aiSdk: version });
  handlers.push(handler);
  return handler;
}

/** The parts as JSON carries them (a live part's undefined fields are not sent). */
const plain = (message: UIMessage): unknown => JSON.parse(JSON.stringify(message.parts));

/** The page's answer: on the part (`addToolApprovalResponse`, AI SDK 6 and 7), or beside the messages (5). */
interface PageAnswer {
  approved: boolean;
  reason?: string;
}

const withAnswer = (message: UIMessage, { approved, reason }: PageAnswer): UIMessage => ({
  ...message,
  parts: message.parts.map((part) =>
    part.state === 'approval-requested' ? { ...part, state: 'approval-responded', approval: { ...part.approval!, approved, ...(reason !== undefined && { reason }) } } : part,
  ),
});

/** Sends the page's answer; the stream continues `asked` (the message the page holds). */
async function answer(sdk: Sdk, handler: ChatHandler, chatId: string, user: unknown, asked: UIMessage, given: PageAnswer) {
  const fetch = ((input: string, init?: RequestInit) => handler(new Request(input, init))) as typeof globalThis.fetch;
  const send = { chatId, trigger: 'submit-message', messageId: undefined, abortSignal: undefined } as const;
  if (sdk.version === 5) {
    const approvalId = String(asked.parts.find((p) => p.type === 'data-approval-request')!.data!.approvalId);
    const approvals = [{ approvalId, ...given }];
    const transport = new sdk.DefaultChatTransport({ api: 'http://127.0.0.1/api/chat', fetch, body: { approvals } });
    return { stream: await transport.sendMessages({ ...send, messages: [user, asked] }), holds: asked };
  }
  const holds = withAnswer(asked, given);
  const transport = new sdk.DefaultChatTransport({ api: 'http://127.0.0.1/api/chat', fetch });
  return { stream: await transport.sendMessages({ ...send, messages: [user, holds] }), holds };
}

/**
 * What AI SDK 6 can replay of a live message: no part carries the page's answer (`approval`), and
 * a denied call shows as the error the model read (`errors`: its text, by call id).
 */
function replayedIn6(live: UIMessage, errors: Record<string, string>): UIMessage {
  return {
    ...live,
    parts: live.parts.map(({ approval: _, ...part }) => {
      if (part.state !== 'output-denied') return part;
      return { ...part, state: 'output-error', errorText: errors[part.toolCallId!]! };
    }),
  };
}

const skipOn = (version: 5 | 6 | 7) => version === 7 && nodeMajor < 22;

interface Scenario {
  version: 5 | 6 | 7;
  /** The first reply's calls. */
  calls: Array<{ id: string; name: string; args: Record<string, unknown> }>;
  given: PageAnswer;
  toolPolicy?: ToolPolicy;
}

/**
 * The page asks, answers, and the run goes on to a model turn that waits: there another page
 * reattaches (in this process, or in a new one after this one closed). Both read to the run's end.
 */
async function run({ version, calls, given, toolPolicy }: Scenario, restart: boolean): Promise<{ live: UIMessage; reattached: UIMessage; sdk: Sdk }> {
  const sdk = await loadSdk(version);
  const store = new MemorySessionStore();
  const turn = gate();
  const handler = handlerOf(version, store, [{ text: 'Sending.', toolCalls: calls }, turn.entry], toolPolicy);
  const chat = page(sdk, handler, 'c');
  const user = userMessage('Send 5.');
  const asked = await chat.send([user]);
  expect(asked.metadata?.outcome).toBe('waiting');
  const { stream, holds } = await answer(sdk, handler, 'c', user, asked, given);
  const live = chat.read(stream, holds);
  await turn.reached;
  let again = page(sdk, handler, 'c');
  if (restart) {
    await handler.close();
    again = page(sdk, handlerOf(version, store, [{ text: 'Sending.', toolCalls: calls }, { text: 'Done.' }], toolPolicy), 'c');
  }
  const replay = await again.transport.reconnectToStream({ chatId: 'c' });
  expect(replay).not.toBeNull();
  const reattached = again.read(replay!);
  turn.open();
  const [watched, read] = await Promise.all([live, reattached]);
  expect(again.errors).toEqual([]);
  expect(read.metadata?.outcome).toBe('Completed');
  if (!restart) expect([chat.errors, watched.metadata?.outcome]).toEqual([[], 'Completed']);
  return { live: watched, reattached: read, sdk };
}

const transferFive = [{ id: 't1', name: 'transfer', args: { amount: 5 } }];

describe.each([5, 6, 7] as const)('reattaching after the page answered, AI SDK %s', (version) => {
  describe.each([
    ['in this process', false],
    ['in another process, after a restart', true],
  ])('%s', (_, restart) => {
    it.skipIf(skipOn(version)).each([
      ['approved', { approved: true }, ''],
      ['denied without a reason', { approved: false }, 'denied: the user did not approve this tool call'],
      ['denied with a reason', { approved: false, reason: 'Not today.' }, 'denied: Not today.'],
    ] as const)('%s: the reattached message is the live one', async (_, given, error) => {
      const scenario: Scenario = { version, calls: transferFive, given };
      // After a restart the live page's stream was cut off: it is the same run, watched in full, that it is compared with.
      const { live } = restart ? await run(scenario, false) : { live: undefined };
      const result = await run(scenario, restart);
      const watched = live ?? result.live;
      const part = watched.parts.find((p) => p.toolCallId === 't1')!;
      if (version === 5) expect(part.state).toBe(given.approved ? 'output-available' : 'output-error');
      else expect(part).toMatchObject({ state: given.approved ? 'output-available' : 'output-denied', approval: { approved: given.approved } });
      expect(plain(result.reattached)).toEqual(plain(version === 6 ? replayedIn6(watched, { t1: error }) : watched));
      await expect(result.sdk.validateUIMessages({ messages: [result.reattached] })).resolves.toBeDefined();
    });
  });

  it.skipIf(skipOn(version))('a call a tool policy denied stays an error, as live (nobody was asked), beside one the page approved', async () => {
    const calls = [
      { id: 'l1', name: 'lookup', args: { word: 'secret' } },
      { id: 't1', name: 'transfer', args: { amount: 5 } },
    ];
    const scenario: Scenario = { version, calls, given: { approved: true }, toolPolicy: noSecrets };
    for (const restart of [false, true]) {
      const { live: watched } = await run(scenario, false);
      const { reattached, sdk } = await run(scenario, restart);
      expect(watched.parts.find((p) => p.toolCallId === 'l1')).toMatchObject({ state: 'output-error', errorText: 'denied: no lookups today' });
      expect(plain(reattached)).toEqual(plain(version === 6 ? replayedIn6(watched, {}) : watched));
      await expect(sdk.validateUIMessages({ messages: [reattached] })).resolves.toBeDefined();
    }
  });

  it.skipIf(skipOn(version))('a call a tool policy denied, reattached while the run waits for the page: as the page was shown it', async () => {
    const sdk = await loadSdk(version);
    const store = new MemorySessionStore();
    const calls = [
      { id: 'l1', name: 'lookup', args: { word: 'secret' } },
      { id: 't1', name: 'transfer', args: { amount: 5 } },
    ];
    const handler = handlerOf(version, store, [{ text: 'Sending.', toolCalls: calls }, { text: 'Done.' }], noSecrets);
    const asked = await page(sdk, handler, 'c').send([userMessage('Send 5.')]);
    const reattached = (await page(sdk, handler, 'c').resume())!;
    expect(asked.parts.find((p) => p.toolCallId === 'l1')).toMatchObject({ state: 'output-error', errorText: 'denied: no lookups today' });
    expect(plain(reattached)).toEqual(plain(asked));
    await expect(sdk.validateUIMessages({ messages: [reattached] })).resolves.toBeDefined();
  });
});

describe.each([5, 6, 7] as const)('reattaching after the page declined to run a call in doubt again, AI SDK %s', (version) => {
  /** A charge tool whose first run never returns (the process "dies" in it). */
  function charging(turn: ScriptEntry) {
    const runs: string[] = [];
    const charge = defineTool({
      name: 'charge',
      description: 'Charges the card.',
      input: z.object({ amount: z.number() }),
      inDoubt: 'ask',
      execute: ({ amount }, ctx) => {
        runs.push(`charge ${amount}`);
        if (runs.length === 1) return new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));
        return `charged ${amount}`;
      },
    });
    const model = scriptedModel([{ text: 'Charging.', toolCalls: [{ id: 'c1', name: 'charge', args: { amount: 5 } }] }, turn]);
    return { machine: createAgentMachine({ model, retry: false, tools: [charge] }), runs };
  }

  it.skipIf(skipOn(version)).each([
    ['without a reason', undefined, 'failed: the user did not run it again after it was cut off'],
    ['with a reason', 'It went through already.', 'failed: It went through already.'],
  ])('%s: the reattached message is the live one', async (_, reason, error) => {
    const sdk = await loadSdk(version);
    const store = new MemorySessionStore();
    const turn = gate();
    const agent = charging(turn.entry);
    // The process dies inside the call: its start is stored, its result never.
    const session = await DurableSession.open({ machine: agent.machine, store, sessionId: 'pay' });
    session.send({ type: 'input', message: 'Charge 5.' });
    for (let i = 0; i < 200 && agent.runs.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    await session.flush();
    session.actor.stop();
    const handler = createChatHandler({ machine: agent.machine, store, aiSdk: version });
    handlers.push(handler);
    const chat = page(sdk, handler, 'pay');
    const asked = (await chat.resume())!;
    expect(asked.metadata?.outcome).toBe('waiting');
    const user = userMessage('Charge 5.');
    const { stream, holds } = await answer(sdk, handler, 'pay', user, asked, { approved: false, ...(reason !== undefined && { reason }) });
    const live = chat.read(stream, holds);
    await turn.reached;
    const again = page(sdk, handler, 'pay');
    const reattached = again.read((await again.transport.reconnectToStream({ chatId: 'pay' }))!);
    turn.open();
    const [watched, read] = await Promise.all([live, reattached]);
    expect([agent.runs, chat.errors, again.errors]).toEqual([['charge 5'], [], []]);
    const part = watched.parts.find((p) => p.toolCallId === 'c1')!;
    if (version === 5) expect(part).toMatchObject({ state: 'output-error', errorText: error });
    else expect(part).toMatchObject({ state: 'output-denied', approval: { approved: false, ...(reason !== undefined && { reason }) } });
    expect(plain(read)).toEqual(plain(version === 6 ? replayedIn6(watched, { c1: error }) : watched));
    await expect(sdk.validateUIMessages({ messages: [read] })).resolves.toBeDefined();
  });
});
