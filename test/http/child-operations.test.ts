/**
 * A subagent's operation that yields, in the chat page: the page gets a `data-operation-yielded`
 * part naming the child (`target`, the path of calls down to it), the response ends `waiting` as
 * for the run's own yield (live, and for a page that reattaches), and `POST <api>/<id>/resume`
 * with `{ operation, payload, target }` resumes that child, whose answer the parent's run goes on
 * with to its final answer. A resume for a target that runs no child, or that waits on another
 * operation, is a 409 that changes nothing stored. A child's budget pause stays the product's to
 * raise: the response ends `paused`, naming the child and why. Before, the chunker showed nothing,
 * the response stayed open, and the parent's call waited for the agent tool's timeout.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createChatHandler, type ChatHandler } from '../../src/http.js';
import { agentTool, createAgentMachine, defineTool, DurableSession, MemorySessionStore, type Operation } from '../../src/index.js';
import { scriptedModel } from '../../src/testing.js';
import { chunksOf, loadSdk, page, resumeRequest as resume, textOf, userMessage, type UIMessage } from './support.js';

const handlers: ChatHandler[] = [];
afterEach(async () => {
  await Promise.all(handlers.splice(0).map((handler) => handler.close()));
});

const within = <T>(promise: Promise<T>, ms = 5000): Promise<T> =>
  Promise.race([promise, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`not settled within ${ms} ms`)), ms).unref())]);

/** The child asks before its first batch whether the gate is open (the page answers `{ open: true }`). */
const gate: Operation<{ open: boolean }, { open: boolean }> = {
  name: 'gate',
  state: { schema: z.object({ open: z.boolean() }), initial: { open: false } },
  resume: { schema: z.strictObject({ open: z.boolean() }), apply: ({ open }) => ({ state: { open } }) },
  beforeTools: (_calls, ctx) => (ctx.state.open ? undefined : { yield: { reason: 'is the gate open?', payload: { door: 'north' } } }),
};

/** A parent whose `kid` tool (call `c1`) runs a child that yields `gate` before its `noop` call (or whose budget pauses it). */
function setup(options: { budget?: boolean; depth?: 2 | 3; sibling?: boolean } = {}) {
  const ran: string[] = [];
  const noop = defineTool({ name: 'noop', description: 'x', input: z.object({}), execute: () => (ran.push('noop'), 'ok') });
  const child = createAgentMachine({
    model: scriptedModel([{ text: 'Child checks.', toolCalls: [{ id: 'k1', name: 'noop', args: {} }], usage: { inputTokens: 100, outputTokens: 100 } }, { text: 'child done' }]),
    tools: [noop],
    ...(options.budget ? { budget: { maxTokens: 10, pause: true } } : { operations: [gate] }),
  });
  const middle =
    options.depth === 3
      ? createAgentMachine({
          model: scriptedModel([{ toolCalls: [{ id: 'm1', name: 'dig', args: { task: 'x' } }] }, (request) => ({ text: `middle: ${String(request.messages.at(-1)!.content)}` })]),
          tools: [agentTool({ agent: child, name: 'dig', description: 'x' })],
        })
      : child;
  // With `sibling`, the parent also calls `slow` (c2), which ends 800 ms later: the response stays open meanwhile.
  const slow = defineTool({ name: 'slow', description: 'x', input: z.object({}), execute: () => new Promise<string>((resolve) => setTimeout(() => resolve('slow done'), 800)) });
  const calls = [{ id: 'c1', name: 'kid', args: { task: 'x' } }, ...(options.sibling ? [{ id: 'c2', name: 'slow', args: {} }] : [])];
  const machine = createAgentMachine({
    model: scriptedModel([
      // A chat that says hello runs no child.
      (request) => (request.messages.at(-1)!.content === 'Hello.' ? { text: 'Hi.' } : { text: 'Asking the kid.', toolCalls: calls }),
      (request) => ({ text: `parent: ${String(request.messages.filter((m) => m.role === 'tool').map((m) => m.content).join(', '))}` }),
    ]),
    tools: [agentTool({ agent: middle, name: 'kid', description: 'x' }), slow],
  });
  const store = new MemorySessionStore();
  const handler = createChatHandler({ machine, store });
  handlers.push(handler);
  return { handler, store, ran, machine };
}



const yieldsOf = (message: UIMessage) => message.parts.filter((part) => part.type === 'data-operation-yielded').map((part) => part.data);

describe.each([2, 3] as const)("a subagent's operation that yields, %s levels deep", (depth) => {
  const target = depth === 2 ? 'c1' : 'c1/m1';

  it('shows the part naming the child, ends the response waiting; the resume with target goes on to the final answer', async () => {
    const env = setup({ depth });
    const chat = page(await loadSdk(6), env.handler, `kid-${depth}`);
    const asked = await within(chat.send([userMessage('Go.')]));
    expect(chat.errors).toEqual([]);
    expect(asked.metadata?.outcome).toBe('waiting');
    expect(yieldsOf(asked)).toEqual([{ operation: 'gate', reason: 'is the gate open?', payload: { door: 'north' }, target }]);
    expect(env.ran).toEqual([]);

    const response = await resume(env.handler, `kid-${depth}`, { operation: 'gate', payload: { open: true }, target });
    expect(response.status).toBe(200);
    const after = await within(chat.read(chunksOf(response), asked));
    expect(chat.errors).toEqual([]);
    expect(env.ran).toEqual(['noop']);
    expect(after.metadata?.outcome).toBe('Completed');
    expect(textOf(after)).toBe(depth === 2 ? 'Asking the kid.|parent: child done' : 'Asking the kid.|parent: middle: child done');
  });

  it('a page that reloads gets the part again, ends waiting, and its resume works', async () => {
    const env = setup({ depth });
    const sdk = await loadSdk(6);
    await within(page(sdk, env.handler, `kid-reload-${depth}`).send([userMessage('Go.')]));
    const reloaded = page(sdk, env.handler, `kid-reload-${depth}`);
    const replay = (await within(reloaded.resume()))!;
    expect(reloaded.errors).toEqual([]);
    expect(replay.metadata?.outcome).toBe('waiting');
    expect(yieldsOf(replay)).toEqual([{ operation: 'gate', reason: 'is the gate open?', payload: { door: 'north' }, target }]);
    const response = await resume(env.handler, `kid-reload-${depth}`, { operation: 'gate', payload: { open: true }, target });
    expect(response.status).toBe(200);
    const after = await within(reloaded.read(chunksOf(response), replay));
    expect(after.metadata?.outcome).toBe('Completed');
    expect(env.ran).toEqual(['noop']);
  });
});

describe('a resume while the handler still holds the chat', () => {
  it('reaches the live child (a sibling call still runs, the first response is open) and both responses go on to the end', async () => {
    const env = setup({ sibling: true });
    const chat = page(await loadSdk(6), env.handler, 'kid-live');
    const first = (await chat.post({ id: 'kid-live', messages: [userMessage('Go.')] })).body!.pipeThrough(new TextDecoderStream()).getReader();
    let seen = '';
    while (!seen.includes('data-operation-yielded')) {
      const read = await within(first.read());
      if (read.done) break;
      seen += read.value;
    }
    expect(seen).toContain('data-operation-yielded');
    expect(seen).not.toContain('"finish"');
    expect(seen).toContain('"target":"c1"');
    const response = await resume(env.handler, 'kid-live', { operation: 'gate', payload: { open: true }, target: 'c1' });
    expect(response.status).toBe(200);
    const rest = await within(response.text());
    expect(env.ran).toEqual(['noop']);
    expect(rest).toContain('"outcome":"Completed"');
    expect([...rest.matchAll(/"delta":"([^"]*)"/g)].map((match) => match[1]).join('')).toBe('parent: child done, slow done');
    for (let read = await first.read(); !read.done; read = await within(first.read())) seen += read.value;
    expect(seen).toContain('"outcome":"Completed"');
  });
});

describe("resumes for a subagent's operation that are refused", () => {
  it.each([
    [{ operation: 'gate', payload: { open: true }, target: 'c9' }, 409, 'NothingToResume'],
    [{ operation: 'gate', payload: { open: true }, target: 'c1/k1' }, 409, 'NothingToResume'],
    [{ operation: 'gate', payload: { open: true }, target: 'c1/c1' }, 409, 'NothingToResume'],
    [{ operation: 'other', payload: { open: true }, target: 'c1' }, 409, 'NothingToResume'],
    [{ operation: 'gate', payload: { open: true } }, 409, 'NothingToResume'],
    [{ operation: 'gate', payload: { open: 'yes' }, target: 'c1' }, 409, 'ResumeRefused'],
    [{ operation: 'budget', payload: { budget: { maxTokens: 1e6 } }, target: 'c1' }, 400, 'InvalidChatRequest'],
    [{ operation: 'gate', payload: { open: true }, target: '' }, 400, 'InvalidChatRequest'],
    [{ operation: 'gate', payload: { open: true }, target: 7 }, 400, 'InvalidChatRequest'],
  ])('%j is answered %i %s, and changes nothing stored', async (body, status, code) => {
    const env = setup();
    const chat = page(await loadSdk(6), env.handler, 'kid-refused');
    const asked = await within(chat.send([userMessage('Go.')]));
    const sessions = ['kid-refused', 'kid-refused/run-1:turn-1:c1'];
    // A payload only the child's operation can check opens the chat again (its trace notes the session's `resumed` and `closed`): nothing else.
    const lifecycle = new Set(['resumed', 'closed']);
    const snapshot = async () =>
      Promise.all(sessions.map(async (id) => ({ row: await env.store.load(id), trace: (await env.store.readTrace(id)).filter(({ entry }) => !lifecycle.has((entry as { type: string }).type)) })));
    const before = await snapshot();
    expect(before[1]!.row).toBeDefined();
    const response = await resume(env.handler, 'kid-refused', body);
    expect(response.status).toBe(status);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe(code);
    expect(await snapshot()).toEqual(before);
    expect(env.ran).toEqual([]);
    // The right one still works.
    const ok = await resume(env.handler, 'kid-refused', { operation: 'gate', payload: { open: true }, target: 'c1' });
    expect(ok.status).toBe(200);
    expect((await within(chat.read(chunksOf(ok), asked))).metadata?.outcome).toBe('Completed');
  });

  it("one chat's page cannot reach another chat's child", async () => {
    const env = setup();
    const sdk = await loadSdk(6);
    await within(page(sdk, env.handler, 'kid-a').send([userMessage('Go.')]));
    expect((await within(page(sdk, env.handler, 'kid-b').send([userMessage('Hello.')]))).metadata?.outcome).toBe('Completed');
    const before = await env.store.load('kid-a/run-1:turn-1:c1');
    for (const target of ['c1', 'kid-a/run-1:turn-1:c1', '../kid-a/c1']) {
      const response = await resume(env.handler, 'kid-b', { operation: 'gate', payload: { open: true }, target });
      expect(response.status, target).toBe(409);
    }
    expect(await env.store.load('kid-a/run-1:turn-1:c1')).toEqual(before);
    expect(env.ran).toEqual([]);
  });
});

describe("a subagent's budget pause, in the chat page", () => {
  it('ends the response paused, naming the child and why; no part asks the page for a resume; the product raises it', async () => {
    const env = setup({ budget: true });
    const chat = page(await loadSdk(6), env.handler, 'kid-paused');
    const ended = await within(chat.send([userMessage('Go.')]));
    expect(ended.metadata).toMatchObject({ run: 1, outcome: 'paused', target: 'c1' });
    expect((ended.metadata as { reason?: string }).reason).toContain('budget');
    expect(yieldsOf(ended)).toEqual([]);
    // A page that reloads is told the same.
    const reloaded = page(await loadSdk(6), env.handler, 'kid-paused');
    expect((await within(reloaded.resume()))!.metadata).toMatchObject({ run: 1, outcome: 'paused', target: 'c1' });
    const refused = await resume(env.handler, 'kid-paused', { operation: 'budget', payload: { budget: { maxTokens: 1e6 } }, target: 'c1' });
    expect(refused.status).toBe(400);
    await env.handler.close();

    // Opened again, the parent's call opens the child from the store, back at its pause: the raise goes down to it then.
    let back!: () => void;
    const paused = new Promise<void>((resolve) => (back = resolve));
    const session = await DurableSession.open({
      machine: env.machine,
      store: env.store,
      sessionId: 'kid-paused',
      attach: (actor) => actor.on('budget.paused', (event) => event.target === 'c1' && back()),
    });
    await within(paused);
    session.send({ type: 'budget.raise', budget: { maxTokens: 1e6 }, target: 'c1' });
    const outcome = await within(session.whenIdle());
    expect(outcome?.outcome).toMatchObject({ type: 'Completed', finalText: 'parent: child done' });
    await session.close();
  });
});
