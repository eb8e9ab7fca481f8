/**
 * Cancellation as seed 003 describes it: the running step's work is dropped, operations get a
 * chance to keep what the interrupted step received (`onCancel`, and a hook in flight that
 * answers within the grace), every unanswered call is answered exactly once, the run ends
 * `Cancelled`. Nothing is evaluated after the cancel (prompt parts, budgets); steering queued
 * at the cancel is kept in the conversation.
 */
import { describe, expect, it } from 'vitest';
import { createActor, waitFor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine, type AgentActor } from '../../../machines/agent.machine.js';
import { AgentStepper } from '../../../src/agent/hosts/stepper.js';
import type { InterruptedStep, Operation } from '../../../src/agent/operations/operation.js';
import type { Message } from '../../../src/schemas.js';
import { scriptedModel } from '../../../src/testing.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { INTERRUPTED_CONTENT } from '../../../src/tools/run-tools.js';
import { echoTool, providerValid, waitTool } from '../../support/driver.js';
import type { Model } from '../../../src/model.js';

const WAIT = { timeout: 5_000 };
const idle = (actor: AgentActor) => waitFor(actor, (s) => s.matches('Idle') && s.context.runIndex === 1, WAIT);
const outcomeOf = (actor: AgentActor) => actor.getSnapshot().context.lastRun?.outcome;
const toolResults = (messages: readonly Message[]) => messages.filter((m) => m.role === 'tool');

/** An operation whose beforeTools runs as `behave` says, with a slice that records what it kept. */
function gate(behave: (signal: AbortSignal) => Promise<unknown>): Operation<{ kept: string[] }> {
  return {
    name: 'gate',
    state: { schema: z.object({ kept: z.array(z.string()) }), initial: { kept: [] } },
    beforeTools: (_calls, ctx) => behave(ctx.signal) as never,
  };
}

function running(operations: Operation[], tools = [echoTool]) {
  const model = scriptedModel([{ toolCalls: [{ id: 'a', name: 'echo', args: { text: 'x' } }] }, { text: 'never' }]);
  const actor = createActor(createAgentMachine({ model, tools, operations }), { input: { sessionId: 's' } }).start();
  actor.send({ type: 'input', message: 'go' });
  return actor;
}

describe('a hook in flight when the run is cancelled', () => {
  it('one that returns just after the cancel: its state is kept, the run ends Cancelled', async () => {
    const actor = running([
      gate((signal) => new Promise((resolve) => signal.addEventListener('abort', () => setTimeout(() => resolve({ state: { kept: ['what arrived'] } }), 5)))),
    ]);
    await waitFor(actor, (s) => s.matches({ Running: 'Operating' }), WAIT);
    actor.send({ type: 'cancel' });
    const done = await idle(actor);
    expect(outcomeOf(actor)).toEqual({ type: 'Cancelled' });
    expect(done.context.operations.slices).toEqual({ gate: { kept: ['what arrived'] } });
    expect(providerValid(done.context.brain.context.history)).toBe(true);
  });

  it('one that hangs (ignores its signal): the run ends Cancelled after the grace, the actor lives', async () => {
    const actor = running([gate(() => new Promise(() => {}))]);
    await waitFor(actor, (s) => s.matches({ Running: 'Operating' }), WAIT);
    const started = Date.now();
    actor.send({ type: 'cancel', graceMs: 50 });
    await idle(actor);
    expect(Date.now() - started).toBeLessThan(4_000);
    expect(outcomeOf(actor)).toEqual({ type: 'Cancelled' });
    expect(actor.getSnapshot().status).toBe('active');
  });

  it('one that fails as it is aborted: the run ends Cancelled, not Failed', async () => {
    const actor = running([gate((signal) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')))))]);
    await waitFor(actor, (s) => s.matches({ Running: 'Operating' }), WAIT);
    actor.send({ type: 'cancel' });
    await idle(actor);
    expect(outcomeOf(actor)).toEqual({ type: 'Cancelled' });
  });
});

describe('onCancel', () => {
  it('sees the results that arrived and the unanswered calls, and keeps its state; every call is answered once', async () => {
    const seen: InterruptedStep[] = [];
    const keeper: Operation<{ results: string[] }> = {
      name: 'keeper',
      state: { schema: z.object({ results: z.array(z.string()) }), initial: { results: [] } },
      onCancel: (step) => {
        seen.push(structuredClone(step));
        return { state: { results: step.results.map((r) => r.content) } };
      },
    };
    const { tool: wait } = waitTool();
    const model = scriptedModel([
      {
        toolCalls: [
          { id: 'fast', name: 'echo', args: { text: 'got it' } },
          { id: 'slow', name: 'wait', args: { ms: 60_000, label: 'slow' } },
          { id: 'queued', name: 'wait', args: { ms: 60_000, label: 'queued' } },
          { id: 'gated', name: 'ask', args: {} },
          { id: 'nobody', name: 'missing', args: {} },
        ],
      },
      { text: 'never' },
    ]);
    const ask = defineTool({ name: 'ask', description: 'Needs a human.', input: z.object({}), needsApproval: true, execute: () => 'asked' });
    const actor = createActor(createAgentMachine({ model, tools: [echoTool, wait, ask], operations: [keeper], toolConcurrency: 2 }), { input: { sessionId: 's' } }).start();
    actor.send({ type: 'input', message: 'go' });
    await waitFor(actor, (s) => s.context.toolJournal.some((r) => r.toolCallId === 'fast') && s.matches({ Running: { AwaitingTools: { Working: { Approval: 'AwaitingApproval' } } } }), WAIT);
    actor.send({ type: 'cancel' });
    const done = await idle(actor);
    expect(outcomeOf(actor)).toEqual({ type: 'Cancelled' });
    expect(seen).toHaveLength(1);
    expect(seen[0]!.results.map((r) => r.toolCallId)).toEqual(['fast', 'nobody']);
    expect(seen[0]!.unanswered.map((c) => c.id)).toEqual(['slow', 'queued', 'gated']);
    expect(done.context.operations.slices).toEqual({ keeper: { results: ['got it', "tool 'missing' is not available"] } });
    const results = toolResults(done.context.brain.context.history);
    expect(results.map((r) => r.toolCallId)).toEqual(['fast', 'slow', 'queued', 'gated', 'nobody']);
    // slow ran; queued (behind toolConcurrency) and gated (waiting for an approval) never started.
    expect(results.find((r) => r.toolCallId === 'slow')?.content).toBe(INTERRUPTED_CONTENT);
    for (const id of ['queued', 'gated']) expect(results.find((r) => r.toolCallId === id)?.content).toBe('interrupted: the run was cancelled before this tool call started; it did not run');
    expect(providerValid(done.context.brain.context.history)).toBe(true);
  });

  it('one that throws is reported and the run still ends Cancelled', async () => {
    const failing: Operation = { name: 'failing', onCancel: () => { throw new Error('cannot keep'); } };
    const { tool: wait } = waitTool();
    const model = scriptedModel([{ toolCalls: [{ id: 'w', name: 'wait', args: { ms: 60_000, label: 'w' } }] }, { text: 'never' }]);
    const actor = createActor(createAgentMachine({ model, tools: [wait], operations: [failing] }), { input: { sessionId: 's' } });
    const failed: string[] = [];
    actor.on('operation.failed', (e) => failed.push(`${e.operation} ${e.error.hook}`));
    actor.start();
    actor.send({ type: 'input', message: 'go' });
    await waitFor(actor, (s) => s.matches({ Running: 'AwaitingTools' }), WAIT);
    actor.send({ type: 'cancel' });
    await idle(actor);
    expect(outcomeOf(actor)).toEqual({ type: 'Cancelled' });
    expect(failed).toEqual(['failing onCancel']);
  });

  it("AgentStepper.finalize runs it too, without waiting", async () => {
    const kept: string[] = [];
    const op: Operation = { name: 'k', onCancel: (step) => void kept.push(...step.unanswered.map((c) => c.id)) };
    const model = scriptedModel([{ toolCalls: [{ id: 'x', name: 'echo', args: { text: 'x' } }] }, { text: 'never' }]);
    const stepper = new AgentStepper(createAgentMachine({ model, tools: [echoTool], operations: [op] }), { input: { prompt: 'go' } });
    const first = await stepper.step();
    stepper.apply(first.effects);
    stepper.finalize();
    expect(stepper.status()).toBe('finished');
    expect(kept).toEqual(['x']);
  });
});

describe('nothing is evaluated after the cancel', () => {
  it('no prompt part is asked for once the run is cancelled', async () => {
    let prompts = 0;
    const counting: Operation = { name: 'counting', prompt: () => `call ${++prompts}` };
    const { tool: wait } = waitTool();
    const model = scriptedModel([{ toolCalls: [{ id: 'w', name: 'wait', args: { ms: 60_000, label: 'w' } }] }, { text: 'never' }]);
    const actor = createActor(createAgentMachine({ model, tools: [wait], operations: [counting] }), { input: { sessionId: 's' } }).start();
    actor.send({ type: 'input', message: 'go' });
    await waitFor(actor, (s) => s.matches({ Running: 'AwaitingTools' }), WAIT);
    const before = prompts;
    actor.send({ type: 'cancel' });
    await idle(actor);
    expect(prompts).toBe(before);
  });

  it('a budget is not checked after the cancel: the run ends Cancelled, not Sealed', async () => {
    const { tool: wait } = waitTool();
    const model = scriptedModel([
      { toolCalls: [{ id: 'e', name: 'echo', args: { text: 'x' } }, { id: 'w', name: 'wait', args: { ms: 60_000, label: 'w' } }] },
      { text: 'never' },
    ]);
    const actor = createActor(createAgentMachine({ model, tools: [echoTool, wait], budget: { maxToolCalls: 1 } }), { input: { sessionId: 's' } }).start();
    actor.send({ type: 'input', message: 'go' });
    await waitFor(actor, (s) => s.context.toolJournal.length === 1, WAIT);
    actor.send({ type: 'cancel' });
    await idle(actor);
    expect(outcomeOf(actor)).toEqual({ type: 'Cancelled' });
  });
});

describe('steering queued at the cancel', () => {
  it('is kept in the conversation the next run sees', async () => {
    let calls = 0;
    const model: Model = {
      name: 'hanging',
      generate: (request) =>
        new Promise((_, reject) => {
          calls++;
          request.signal.addEventListener('abort', () => reject(request.signal.reason));
        }),
    };
    const actor = createActor(createAgentMachine({ model }), { input: { sessionId: 's' } }).start();
    actor.send({ type: 'input', message: 'first' });
    await waitFor(actor, (s) => s.matches({ Running: 'AwaitingModel' }), WAIT);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(calls).toBe(1);
    actor.send({ type: 'steer', message: 'also this' });
    actor.send({ type: 'cancel' });
    const done = await idle(actor);
    expect(outcomeOf(actor)).toEqual({ type: 'Cancelled' });
    expect(done.context.brain.context.history).toEqual([
      { role: 'user', content: 'first' },
      { role: 'user', content: 'also this' },
    ]);
  });
});
