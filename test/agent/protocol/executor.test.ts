/**
 * The executor seam (issue 9): every side effect of a run reaches the configured executor as
 * { key, kind, input } with the work that performs it; executors compose by wrapping; a durable
 * session journals and replays through the same seam.
 */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { composeExecutors, inProcessExecutor, type Executor, type SideEffect } from '../../../src/agent/protocol/executor.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { MemoryBacking, MemorySessionStore } from '../../../src/stores/memory.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { runFinished, runToCompletion } from '../../support/driver.js';

const echo = defineTool({ name: 'echo', description: 'Echoes', input: z.object({ text: z.string() }), execute: ({ text }) => text });
const guarded = defineTool({
  name: 'write',
  description: 'Writes',
  input: z.object({ path: z.string() }),
  needsApproval: ({ path }) => path.startsWith('/'),
  execute: ({ path }) => `wrote ${path}`,
});

/** An executor that records what it saw, then performs. */
function recorder(log: string[]): Executor {
  return async (effect, perform) => {
    log.push(`${effect.kind} ${effect.key}`);
    return perform();
  };
}

const script = () =>
  scriptedModel([
    { toolCalls: [{ id: 'a', name: 'echo', args: { text: 'x' } }, { id: 'b', name: 'write', args: { path: 'rel' } }] },
    { text: 'done' },
  ]);

describe('the executor seam', () => {
  it('sees every side effect of a run with its kind and stable key: model calls, tool calls, approval checks', async () => {
    const log: string[] = [];
    const agent = createAgentMachine({ model: script(), tools: [echo, guarded], executor: recorder(log) });
    const output = await runToCompletion(createActor(agent, { input: { prompt: 'go', sessionId: 's' } }));
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    expect(log).toEqual([
      'model s:run-1:turn-1:model',
      'approval s:run-1:turn-1:tools:approvals:b:approval',
      'tool s:run-1:turn-1:tools:a',
      // b needs approval, so it asks when in doubt (the default): its start is a step of its own, before it runs.
      'toolStart s:run-1:turn-1:tools:b:started',
      'tool s:run-1:turn-1:tools:b',
      'model s:run-1:turn-2:model',
    ]);
  });

  it('sees the compaction call too', async () => {
    const kinds: string[] = [];
    const agent = createAgentMachine({
      model: scriptedModel([{ text: Array.from({ length: 800 }, (_, i) => `word${i}`).join(' ') }, { text: 'after' }]),
      compactor: async ({ messages }) => ({ messages: messages.slice(-1), tokensAfter: 10 }),
      policy: { contextWindow: 3000, compactThreshold: 50 },
      executor: async (effect, perform) => (kinds.push(effect.kind), perform()),
    });
    const actor = createActor(agent, { input: { sessionId: 's' } }).start();
    actor.send({ type: 'input', message: 'one' });
    await runFinished(actor, 1);
    actor.send({ type: 'input', message: 'two' });
    await runFinished(actor, 2);
    expect(kinds).toContain('compaction');
  });

  it('may answer without performing: the tool never runs, and the run uses the answer', async () => {
    let ran = 0;
    const counted = defineTool({ name: 'echo', description: 'x', input: z.object({ text: z.string() }), execute: () => (ran++, 'real') });
    const canned: Executor = async (effect, perform) =>
      effect.kind === 'tool'
        ? ({ role: 'tool', toolCallId: (effect as SideEffect<'tool'>).input.call.id, toolName: 'echo', content: 'from the journal' } as never)
        : perform();
    const agent = createAgentMachine({ model: scriptedModel([{ toolCalls: [{ name: 'echo', args: { text: 'x' } }] }, { text: 'done' }]), tools: [counted], executor: canned });
    const output = await runToCompletion(createActor(agent, { input: { prompt: 'go' } }));
    expect(ran).toBe(0);
    expect(output.messages.find((m) => m.role === 'tool')).toMatchObject({ content: 'from the journal' });
  });

  it('composes by wrapping: the later wrapper sees each effect first', async () => {
    const log: string[] = [];
    const executor = composeExecutors(inProcessExecutor, (inner) => async (e, p) => (log.push(`inner ${e.kind}`), inner(e, p)), (inner) => async (e, p) => (log.push(`outer ${e.kind}`), inner(e, p)));
    const agent = createAgentMachine({ model: scriptedModel([{ text: 'hi' }]), executor });
    await runToCompletion(createActor(agent, { input: { prompt: 'go' } }));
    expect(log).toEqual(['outer model', 'inner model']);
  });

  it('an executor that throws fails the run with the kind of the effect, and the actor goes on', async () => {
    const agent = createAgentMachine({
      model: scriptedModel([{ toolCalls: [{ name: 'echo', args: { text: 'x' } }] }, { text: 'done' }]),
      tools: [echo],
      executor: async (effect, perform) => {
        if (effect.kind === 'tool') throw new Error('tool host unreachable');
        return perform();
      },
    });
    const output = await runToCompletion(createActor(agent, { input: { prompt: 'go' } }));
    expect(output.outcome).toEqual({ type: 'Failed', error: { type: 'ToolError', message: 'tool host unreachable' } });
  });
});

describe('a durable session through the seam', () => {
  it("wraps the machine's executor: a tracer outside durability sees a journaled tool replayed, the tool runs once", async () => {
    const backing = new MemoryBacking();
    const ran: string[] = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const slow = defineTool({ name: 'slow', description: 'x', input: z.object({}), execute: async () => (await held, 'slow done') });
    const quick = defineTool({ name: 'quick', description: 'x', input: z.object({}), execute: () => (ran.push('quick'), 'quick done') });
    const model = () => scriptedModel([{ toolCalls: [{ id: 'q', name: 'quick', args: {} }, { id: 's', name: 'slow', args: {} }] }, { text: 'done' }]);

    const inner: string[] = [];
    const first = await DurableSession.open({
      machine: createAgentMachine({ model: model(), tools: [quick, slow], executor: recorder(inner) }),
      store: new MemorySessionStore(backing),
      sessionId: 'd',
    });
    const quickDone = new Promise((resolve) => first.actor.on('tool.finished', resolve));
    first.send({ type: 'input', message: 'go' });
    await quickDone;
    await first.close(); // the slow call was in flight: it is run again on resume

    const traced: string[] = [];
    const innerB: string[] = [];
    const second = await DurableSession.open({
      machine: createAgentMachine({ model: model(), tools: [quick, slow], executor: recorder(innerB) }),
      store: new MemorySessionStore(backing),
      sessionId: 'd',
      wrapExecutor: (durable) => async (effect, perform) => {
        traced.push(`trace ${effect.kind} ${effect.key}`);
        return durable(effect, perform);
      },
    });
    release();
    const output = await second.whenIdle();
    await second.close();
    expect(output!.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    expect(ran).toEqual(['quick']);
    // The tracer saw the replayed tool; the machine's own executor (inside durability) did not.
    expect(traced).toContain('trace tool d:run-1:turn-1:tools:q');
    expect(innerB).not.toContain('tool d:run-1:turn-1:tools:q');
    expect(innerB).toContain('tool d:run-1:turn-1:tools:s');
    expect(inner).toContain('tool d:run-1:turn-1:tools:q');
  });
});
