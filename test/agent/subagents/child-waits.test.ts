/**
 * A child run that waits for a person on something other than an approval (its budget paused, an
 * operation yielded) shows its wait at the parent, and the parent's resume reaches it, as its
 * approvals do: `budget.paused` and `operation.yielded` carry `target`, the path of calls down to
 * the child (`c1`, `c1/e1`), and `budget.raise` / `operation.resume` with that `target` go down.
 * Before, nothing surfaced and nothing could reach the child: the parent's call hung until the
 * agent tool's timeout (10 minutes by default) and the child's work was lost.
 */
import { describe, expect, it } from 'vitest';
import { createActor, toPromise } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { AgentEmitted, AgentOutput } from '../../../src/agent/protocol/actor-types.js';
import type { Operation } from '../../../src/agent/operations/operation.js';
import { agentTool } from '../../../src/agent/subagents/agent-tool.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { runAgent } from '../../../src/index.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';

const noop = defineTool({ name: 'noop', description: 'x', input: z.object({}), execute: () => 'ok' });

/** A child whose operation yields before its first tool batch, until a resume opens the gate. */
function gatedChild() {
  const gate: Operation<{ open: boolean }, { open: boolean }> = {
    name: 'gate',
    state: { schema: z.object({ open: z.boolean() }), initial: { open: false } },
    resume: { schema: z.object({ open: z.boolean() }), apply: ({ open }) => ({ state: { open } }) },
    beforeTools: (_calls, ctx) => (ctx.state.open ? undefined : { yield: { reason: 'waiting for the gate' } }),
  };
  return createAgentMachine({ model: scriptedModel([{ toolCalls: [{ name: 'noop', args: {} }] }, { text: 'child done' }]), tools: [noop], operations: [gate] });
}

/** A child whose first reply goes past its token budget, which pauses. */
function pausingChild() {
  return createAgentMachine({
    model: scriptedModel([{ toolCalls: [{ name: 'noop', args: {} }], usage: { inputTokens: 100, outputTokens: 100 } }, { text: 'child done' }]),
    tools: [noop],
    budget: { maxTokens: 10, pause: true },
  });
}

function parentOf(child: ReturnType<typeof createAgentMachine>) {
  return createAgentMachine({
    model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'kid', args: { task: 'x' } }] }, (request) => ({ text: `parent: ${String(request.messages.at(-1)!.content)}` })]),
    tools: [agentTool({ agent: child, name: 'kid', description: 'x', timeoutMs: 5_000 })],
  });
}

function watch(machine: ReturnType<typeof createAgentMachine>) {
  const actor = createActor(machine, { input: { prompt: 'go' } });
  const events: AgentEmitted[] = [];
  actor.on('*', (event) => events.push(event));
  const done = Promise.race([toPromise(actor), new Promise<never>((_, reject) => setTimeout(() => reject(new Error('still running after 3 s')), 3_000))]) as Promise<AgentOutput>;
  actor.start();
  return { actor, events, done };
}

async function until(check: () => boolean, ms = 2_000): Promise<void> {
  for (const end = Date.now() + ms; !check(); await new Promise((resolve) => setTimeout(resolve, 5))) {
    if (Date.now() > end) throw new Error(`not so after ${ms} ms`);
  }
}

describe("a child's wait for a person other than an approval", () => {
  it('a child paused by its budget shows at the parent, and a raise sent to its call lifts it', async () => {
    const child = pausingChild();
    const { actor, events, done } = watch(parentOf(child));
    await until(() => events.some((e) => e.type === 'budget.paused'));
    expect(events.find((e) => e.type === 'budget.paused')).toMatchObject({ kind: 'tokens', target: 'c1' });
    expect(events.find((e) => e.type === 'operation.yielded')).toMatchObject({ operation: 'budget', target: 'c1' });
    actor.send({ type: 'budget.raise', budget: { maxTokens: 10_000 }, target: 'c1' });
    expect((await done).outcome).toMatchObject({ type: 'Completed', finalText: 'parent: child done' });
  });

  it("a child's operation that yields shows at the parent, and operation.resume sent to its call resumes it", async () => {
    const child = gatedChild();
    const { actor, events, done } = watch(parentOf(child));
    await until(() => events.some((e) => e.type === 'operation.yielded'));
    expect(events.find((e) => e.type === 'operation.yielded')).toMatchObject({ operation: 'gate', reason: 'waiting for the gate', target: 'c1' });
    actor.send({ type: 'operation.resume', operation: 'gate', payload: { open: true }, target: 'c1' });
    expect((await done).outcome).toMatchObject({ type: 'Completed', finalText: 'parent: child done' });
  });

  it('a raise or a resume sent to a call that runs no child is refused, and the parent is left as it was', async () => {
    const child = pausingChild();
    const { actor, events, done } = watch(parentOf(child));
    await until(() => events.some((e) => e.type === 'budget.paused'));
    actor.send({ type: 'budget.raise', budget: { maxTokens: 10_000 }, target: 'zz' });
    actor.send({ type: 'operation.resume', operation: 'budget', payload: { budget: { maxTokens: 10_000 } }, target: 'zz' });
    expect(events.filter((e) => e.type === 'event.rejected').map((e) => (e as { event: string }).event)).toEqual(['budget.raise', 'operation.resume']);
    actor.send({ type: 'operation.resume', operation: 'budget', payload: { budget: { maxTokens: 10_000 } }, target: 'c1' });
    expect((await done).outcome).toMatchObject({ type: 'Completed', finalText: 'parent: child done' });
  });
});

describe('under runAgent, which holds the only handle: nobody can resume a child', () => {
  const within = <T>(promise: Promise<T>, ms: number) =>
    Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`still running after ${ms} ms`)), ms))]);
  /** The parent of parentOf run by runAgent, its agent tool's timeout 60 s. */
  const runUnder = (child: ReturnType<typeof createAgentMachine>) => {
    const kid = agentTool({ agent: child, name: 'kid', description: 'x', timeoutMs: 60_000 });
    const model = scriptedModel([{ toolCalls: [{ id: 'c1', name: 'kid', args: { task: 'x' } }] }, (request) => ({ text: `parent: ${String(request.messages.at(-1)!.content)}` })]);
    return runAgent({ model, tools: [kid], prompt: 'go' });
  };

  it("a child's yielded operation seals the child (as runAgent seals its own run's), and the parent goes on at once", async () => {
    // Before: the parent's call waited for the agent tool's timeout (here 60 s, 10 minutes by default).
    const result = await within(runUnder(gatedChild()), 3_000);
    expect(result.outcome.type).toBe('Completed');
    expect(result.text).toContain("the 'gate' operation yielded (waiting for the gate) and runAgent cannot resume it");
  });

  it("a child paused by its budget is sealed the same way", async () => {
    const result = await within(runUnder(pausingChild()), 3_000);
    expect(result.outcome.type).toBe('Completed');
    expect(result.text).toContain("the 'budget' operation yielded");
  });
});

describe('a resume for a child sent as soon as its parent is reopened', () => {
  it('waits for the call to have its child again, instead of going to no one', async () => {
    const child = gatedChild();
    const machine = parentOf(child);
    const store = new MemorySessionStore();
    const first = await DurableSession.open({ machine, store, sessionId: 'boss' });
    const yielded = new Promise((resolve) => first.actor.on('operation.yielded', resolve));
    first.send({ type: 'input', message: 'go' });
    await yielded;
    await first.close();

    const second = await DurableSession.open({ machine, store, sessionId: 'boss' });
    // At once: the reopened parent's call has not started its child again yet.
    second.send({ type: 'operation.resume', operation: 'gate', payload: { open: true }, target: 'c1' });
    const output = await Promise.race([second.whenIdle(), new Promise<never>((_, reject) => setTimeout(() => reject(new Error('still waiting after 3 s')), 3_000))]);
    await second.close();
    expect(output!.outcome).toMatchObject({ type: 'Completed', finalText: 'parent: child done' });
  });
});
