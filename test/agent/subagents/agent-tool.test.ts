/**
 * Agents inside agents (issue 22): an agent machine as a tool. The child runs as an actor of the
 * parent's system with its own instructions, model and tools; what goes wrong in it is an error
 * result for the parent; approvals, cancel and steer reach it through the parent; usage is counted once.
 */
import { createActor, type InspectionEvent } from 'xstate';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine, type AgentMachine } from '../../../machines/agent.machine.js';
import { type AgentOutput } from '../../../src/agent/protocol/actor-types.js';
import { agentTool } from '../../../src/agent/subagents/agent-tool.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { scriptedModel, type ScriptEntry } from '../../../src/models/scripted.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';
import type { Message, ModelRequest, ToolMessage } from '../../../src/index.js';

const usage = (n: number) => ({ inputTokens: n, outputTokens: n });
const delegate = (name: string, task: string, id = 'c1'): ScriptEntry => ({ toolCalls: [{ id, name, args: { task } }], usage: usage(10) });

/** A coordinator that makes one call of `tool` and then answers with the tool's result. */
function coordinator(tool: ReturnType<typeof agentTool>, extra: Partial<Parameters<typeof createAgentMachine>[0]> = {}) {
  return createAgentMachine({
    model: scriptedModel([delegate(tool.name, 'find it'), (request) => ({ text: `done: ${lastTool(request.messages)?.content}`, usage: usage(10) })]),
    tools: [tool],
    ...extra,
  });
}

const lastTool = (messages: readonly Message[]) => messages.filter((m): m is ToolMessage => m.role === 'tool').at(-1);

function run(machine: AgentMachine, inspect?: (event: InspectionEvent) => void) {
  const actor = createActor(machine, { input: { sessionId: 'boss', prompt: 'go' }, ...(inspect && { inspect }) });
  const done = new Promise<AgentOutput>((resolve, reject) => actor.subscribe({ complete: () => resolve(actor.getSnapshot().output!), error: reject }));
  actor.start();
  return { actor, done };
}

describe('agentTool', () => {
  it("runs the child with its own instructions and model; its final text is the parent's tool result; the child is an actor of the parent's system", async () => {
    const seen: ModelRequest[] = [];
    const child = createAgentMachine({
      model: scriptedModel([(request) => (seen.push(request), { text: 'found: the kettle', usage: usage(5) })]),
      instructions: 'You are the researcher.',
    });
    const tool = agentTool({ agent: child, name: 'research', description: 'Researches.' });
    const sessions = new Set<string>();
    const { done } = run(coordinator(tool), (event) => {
      if (event.type === '@xstate.snapshot') sessions.add((event.snapshot as { context?: { sessionId?: string } }).context?.sessionId ?? '');
    });
    const output = await done;
    expect(output.outcome).toMatchObject({ type: 'Completed', finalText: 'done: found: the kettle' });
    expect(seen[0]!.messages).toEqual([
      { role: 'system', content: 'You are the researcher.' },
      { role: 'user', content: 'find it' },
    ]);
    expect(sessions).toContain('boss/run-1:turn-1:c1');
    // Usage counted once: the parent's two replies and the child's one.
    expect(output.usage).toEqual(usage(25));
  });

  it('a child that fails, hangs past its timeout or answers a malformed result gives the parent an error result, and the parent completes', async () => {
    const failing = createAgentMachine({ model: scriptedModel([{ error: { message: 'provider down', retryable: false } }]), retry: false });
    const hanging = createAgentMachine({ model: scriptedModel([{ text: 'late', delayMs: 60_000 }]) });
    const malformed = createAgentMachine({ model: scriptedModel([{ text: '{"score": "high"}' }]) });
    const cases = [
      { tool: agentTool({ agent: failing, name: 'fails', description: 'x' }), error: /subagent 'fails' ended Failed: ModelError: provider down/ },
      { tool: agentTool({ agent: hanging, name: 'hangs', description: 'x', timeoutMs: 100 }), error: /timed out after 100 ms/ },
      {
        tool: agentTool({ agent: malformed, name: 'scores', description: 'x', output: z.object({ score: z.number() }) }),
        error: /subagent 'scores' answered a malformed result/,
      },
    ];
    for (const { tool, error } of cases) {
      const { done } = run(coordinator(tool));
      const output = await done;
      expect(output.outcome.type).toBe('Completed');
      const result = lastTool(output.messages)!;
      expect(result.isError).toBe(true);
      expect(result.content).toMatch(error);
    }
  });

  it("a structured result is checked against the tool's output schema and given as JSON", async () => {
    const scorer = createAgentMachine({ model: scriptedModel([{ text: '{"score": 7}' }]) });
    const tool = agentTool({ agent: scorer, name: 'score', description: 'x', output: z.object({ score: z.number() }) });
    const output = await run(coordinator(tool)).done;
    expect(lastTool(output.messages)).toMatchObject({ content: '{"score":7}' });
    expect(lastTool(output.messages)!.isError).toBeUndefined();
  });

  it("an approval inside a grandchild surfaces at the root with the call path as its id, and the root's decision reaches it", async () => {
    const effects: string[] = [];
    const write = defineTool({
      name: 'write',
      description: 'writes',
      input: z.object({ text: z.string() }),
      needsApproval: true,
      execute: ({ text }) => (effects.push(text), 'written'),
    });
    const writer = createAgentMachine({
      model: scriptedModel([{ toolCalls: [{ id: 'w1', name: 'write', args: { text: 'report' } }] }, (r) => ({ text: `writer: ${lastTool(r.messages)!.content}` })]),
      tools: [write],
    });
    const editor = createAgentMachine({
      model: scriptedModel([delegate('writer', 'write it', 'e1'), (r) => ({ text: `editor: ${lastTool(r.messages)!.content}` })]),
      tools: [agentTool({ agent: writer, name: 'writer', description: 'writes' })],
    });
    const { actor, done } = run(coordinator(agentTool({ agent: editor, name: 'editor', description: 'edits' })));
    const requested = await new Promise<string[]>((resolve) => actor.on('approval.requested', (e) => resolve(e.calls.map((c) => c.id))));
    expect(requested).toEqual(['c1/e1/w1']);
    expect(effects).toEqual([]);
    actor.send({ type: 'approve', toolCallId: 'c1/e1/w1' });
    const output = await done;
    expect(effects).toEqual(['report']);
    expect(output.outcome).toMatchObject({ type: 'Completed', finalText: 'done: editor: writer: written' });
  });

  it('cancel on the parent cancels its running children', async () => {
    const aborted: string[] = [];
    let running = 0;
    const slow = defineTool({
      name: 'slow',
      description: 'waits',
      input: z.object({}),
      execute: (_args, ctx) => (running++, new Promise((resolve) => ctx.signal.addEventListener('abort', () => (aborted.push(ctx.toolCallId), resolve('stopped'))))),
    });
    const worker = createAgentMachine({ model: scriptedModel([{ toolCalls: [{ id: 's1', name: 'slow', args: {} }] }, { text: 'never' }]), tools: [slow] });
    const tool = agentTool({ agent: worker, name: 'work', description: 'x' });
    const parent = createAgentMachine({
      model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'work', args: { task: 'a' } }, { id: 'c2', name: 'work', args: { task: 'b' } }] }, { text: 'x' }]),
      tools: [tool],
    });
    const outcomes: string[] = [];
    const { actor, done } = run(parent, (event) => {
      const snapshot = event.type === '@xstate.snapshot' ? (event.snapshot as { status?: string; output?: AgentOutput; context?: { sessionId?: string } }) : undefined;
      if (snapshot?.status === 'done' && snapshot.context?.sessionId?.startsWith('boss/')) outcomes.push(snapshot.output!.outcome.type);
    });
    // Both children run their tool: the cancel must reach them there (a 20 ms sleep after the
    // parent's batch started was not always enough on a loaded machine).
    await until(() => running === 2);
    expect(aborted).toEqual([]);
    actor.send({ type: 'cancel' });
    expect((await done).outcome.type).toBe('Cancelled');
    await until(() => outcomes.length === 2);
    expect(outcomes).toEqual(['Cancelled', 'Cancelled']);
    expect(aborted.sort()).toEqual(['s1', 's1']);
  });

  it('a steer with a target goes to that child, not to the parent', async () => {
    const childRequests: ModelRequest[] = [];
    // The gate opens only after the steer is sent, and the steer is sent only once the gate runs
    // inside the child: no timer decides which comes first.
    let open!: () => void;
    let gateRunning = false;
    const gate = defineTool({
      name: 'gate',
      description: 'x',
      input: z.object({}),
      execute: () => ((gateRunning = true), new Promise<string>((resolve) => (open = () => resolve('ok')))),
    });
    const worker = createAgentMachine({
      model: scriptedModel([{ toolCalls: [{ id: 'g1', name: 'gate', args: {} }] }, (r) => (childRequests.push(r), { text: 'child done' })]),
      tools: [gate],
    });
    const { actor, done } = run(coordinator(agentTool({ agent: worker, name: 'work', description: 'x' })));
    await until(() => gateRunning);
    actor.send({ type: 'steer', message: 'also check the lid', target: 'c1' });
    open();
    const output = await done;
    expect(childRequests[0]!.messages.some((m) => m.role === 'user' && m.content === 'also check the lid')).toBe(true);
    expect(output.messages.some((m) => m.role === 'user' && m.content === 'also check the lid')).toBe(false);
  });

  it("a child's usage rolls up: a parent budget bounds the whole tree", async () => {
    const spender = createAgentMachine({ model: scriptedModel([{ text: 'spent', usage: usage(500) }]) });
    const parent = coordinator(agentTool({ agent: spender, name: 'spend', description: 'x' }), { budget: { maxTokens: 100 } });
    const output = await run(parent).done;
    expect(output.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/budget: 1020 tokens used, limit 100/) });
  });

  it("a child's usage counts when the parent's run ends while the child still runs (cancel, seal, the time budget's deadline)", async () => {
    for (const end of ['cancel', 'seal', 'deadline'] as const) {
      let started = false;
      const hang = defineTool({
        name: 'hang',
        description: 'waits',
        input: z.object({}),
        execute: (_args, ctx) => ((started = true), new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve('stopped')))),
      });
      // The child has bought a reply (500 + 500 tokens) and waits on its tool when the parent's run ends.
      const worker = createAgentMachine({ model: scriptedModel([{ toolCalls: [{ id: 'h1', name: 'hang', args: {} }], usage: usage(500) }, { text: 'never' }]), tools: [hang] });
      const parent = coordinator(agentTool({ agent: worker, name: 'work', description: 'x' }), end === 'deadline' ? { budget: { maxDurationMs: 300 } } : {});
      const { actor, done } = run(parent);
      await until(() => started);
      if (end === 'cancel') actor.send({ type: 'cancel' });
      if (end === 'seal') actor.send({ type: 'seal', reason: 'enough' });
      const output = await Promise.race([done, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${end}: still running`)), 3_000))]);
      expect(output.outcome.type, end).toBe(end === 'cancel' ? 'Cancelled' : 'Sealed');
      // The parent's first reply (10 + 10) and the child's, which was bought and billed.
      expect(output.usage, end).toEqual(usage(510));
      expect(actor.getSnapshot().context.sessionUsage, end).toEqual(usage(510));
    }
  });

  it("with a model list, a child's tokens count in the parent's cost too: maxCostUsd bounds the whole tree and usageByModel adds up to usage", async () => {
    const spender = createAgentMachine({ model: scriptedModel([{ text: 'spent', usage: usage(50) }]) });
    const tool = agentTool({ agent: spender, name: 'spend', description: 'x' });
    const perToken = { inputPerMillionUsd: 1_000_000, outputPerMillionUsd: 1_000_000 };
    const model = scriptedModel([delegate('spend', 'a'), delegate('spend', 'b', 'c2'), { text: 'never', usage: usage(10) }], { name: 'boss-model' });
    const parent = createAgentMachine({ model: [{ model, prices: perToken }], tools: [tool], budget: { maxCostUsd: 50 } });
    const output = await run(parent).done;
    // Its own reply ($20) and the child's ($100): a child without prices of its own at the parent's, under the child's model.
    expect(output.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/^budget: \$120\.0+ spent, limit \$50$/) });
    expect(output.usage).toEqual(usage(60));
    expect(output.costUsd).toBe(120);
    expect(output.usageByModel).toEqual([
      { model: 'boss-model', usage: usage(10), costUsd: 20 },
      { model: 'scripted', usage: usage(50), costUsd: 100 },
    ]);
  });

  it('under a durable session the child is a session of its own beside its parent, and a finished child is never run again', async () => {
    const store = new MemorySessionStore();
    let childCalls = 0;
    const child = createAgentMachine({ model: scriptedModel([() => (childCalls++, { text: 'child answer', usage: usage(5) })]) });
    const machine = coordinator(agentTool({ agent: child, name: 'research', description: 'x' }));
    const session = await DurableSession.open({ machine, store, sessionId: 'boss' });
    session.send({ type: 'input', message: 'go' });
    const output = await session.whenIdle();
    await session.close();
    expect(output!.outcome).toMatchObject({ type: 'Completed', finalText: 'done: child answer' });
    const ids = (await store.list()).map((s) => s.sessionId).sort();
    expect(ids).toEqual(['boss', 'boss/run-1:turn-1:c1']);
    const stored = await store.load('boss/run-1:turn-1:c1');
    expect(stored!.messages.map((m) => m.content)).toEqual(['find it', 'child answer']);
  });

  it('a call whose child session already finished (the parent resumed after a crash) takes its result without running it again', async () => {
    const store = new MemorySessionStore();
    let childCalls = 0;
    const child = createAgentMachine({ model: scriptedModel([() => (childCalls++, { text: 'stored answer', usage: usage(5) })]) });
    const first = await DurableSession.open({ machine: child, store, sessionId: 'boss/run-1:turn-1:c1' });
    first.send({ type: 'input', message: 'find it' });
    await first.whenIdle();
    await first.close();
    const session = await DurableSession.open({ machine: coordinator(agentTool({ agent: child, name: 'research', description: 'x' })), store, sessionId: 'boss' });
    session.send({ type: 'input', message: 'go' });
    const output = await session.whenIdle();
    await session.close();
    expect(childCalls).toBe(1);
    expect(output!.outcome).toMatchObject({ type: 'Completed', finalText: 'done: stored answer' });
  });
});

async function until(check: () => boolean, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('agentTool under a durable session', () => {
  it('a parent closed while its child waits for approval reopens with the child where it was, and the reopened parent decides it', async () => {
    const store = new MemorySessionStore();
    const effects: string[] = [];
    let childModelCalls = 0;
    const write = defineTool({ name: 'write', description: 'x', input: z.object({}), needsApproval: true, execute: () => (effects.push('w'), 'written') });
    const child = createAgentMachine({
      model: scriptedModel([() => (childModelCalls++, { toolCalls: [{ id: 'w1', name: 'write', args: {} }] }), { text: 'child wrote' }]),
      tools: [write],
    });
    const machine = coordinator(agentTool({ agent: child, name: 'writer', description: 'x' }));
    const first = await DurableSession.open({ machine, store, sessionId: 'boss' });
    const asked = new Promise<string[]>((resolve) => first.actor.on('approval.requested', (e) => resolve(e.calls.map((c) => c.id))));
    first.send({ type: 'input', message: 'go' });
    expect(await asked).toEqual(['c1/w1']);
    await first.close();
    expect(effects).toEqual([]);

    let heard: (ids: string[]) => void = () => {};
    const askedAgain = new Promise<string[]>((resolve) => (heard = resolve));
    const second = await DurableSession.open({
      machine,
      store,
      sessionId: 'boss',
      attach: (actor) => actor.on('approval.requested', (e) => heard(e.calls.map((c) => c.id))),
    });
    expect(await askedAgain).toEqual(['c1/w1']);
    second.send({ type: 'approve', toolCallId: 'c1/w1' });
    const output = await second.whenIdle();
    await second.close();
    expect(output!.outcome).toMatchObject({ type: 'Completed', finalText: 'done: child wrote' });
    expect(effects).toEqual(['w']);
    // The child's first model call was not made again: it resumed at its approval wait.
    expect(childModelCalls).toBe(1);
  });
});

describe("a child's usage across a parent's crash", () => {
  it('is counted once when the parent is reopened while the child runs (the child goes on and reports again)', async () => {
    const store = new MemorySessionStore();
    let runs = 0;
    const hang = defineTool({
      name: 'hang',
      description: 'x',
      input: z.object({}),
      // The first process "dies" while this runs.
      execute: async () => ((runs += 1), runs === 1 ? new Promise<string>(() => {}) : 'ok'),
    });
    const machine = () => {
      const child = createAgentMachine({ model: scriptedModel([{ toolCalls: [{ id: 'h1', name: 'hang', args: {} }], usage: usage(500) }, { text: 'child done', usage: usage(7) }]), tools: [hang] });
      return createAgentMachine({ model: scriptedModel([delegate('kid', 'x'), { text: 'parent done', usage: usage(1) }]), tools: [agentTool({ agent: child, name: 'kid', description: 'x' })] });
    };
    const first = await DurableSession.open({ machine: machine(), store, sessionId: 'boss' });
    first.send({ type: 'input', message: 'go' });
    await until(() => runs === 1 && first.actor.getSnapshot().context.runUsage.inputTokens === 510);
    await first.flush();
    first.actor.stop();
    const second = await DurableSession.open({ machine: machine(), store, sessionId: 'boss' });
    const output = await Promise.race([second.whenIdle(), new Promise<never>((_, reject) => setTimeout(() => reject(new Error('still running')), 3_000))]);
    await second.close();
    expect(output?.outcome).toMatchObject({ type: 'Completed', finalText: 'parent done' });
    // The parent's two replies (10 + 1) and the child's (500 + 7), each once.
    expect(output?.usage).toEqual(usage(518));
  });
});
