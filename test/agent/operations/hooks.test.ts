/** Operations (issue 15): async hooks at each point, through the executor, with abort, timeout and typed errors; state slices. */
import { describe, expect, it } from 'vitest';
import { createActor, waitFor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { type AgentEmitted } from '../../../src/agent/protocol/actor-types.js';
import type { Executor } from '../../../src/agent/protocol/executor.js';
import { OperationError, OperationStateError, type HookContext, type Operation } from '../../../src/agent/operations/operation.js';
import { OPERATION_HOOKS, type OperationHook } from '../../../src/agent/operations/operation-state.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { InvalidSnapshotError } from '../../../src/errors.js';
import { deferred, echoTool, recording, runToCompletion, sleepOrAbort, WAIT_MS } from '../../support/driver.js';

const script = () => scriptedModel([{ toolCalls: [{ name: 'echo', args: { text: 'x' } }] }, { text: 'done' }]);

/** An operation with one hook at `hook` that runs `body` with the hook's context. */
function opAt(hook: OperationHook, name: string, body: (ctx: HookContext) => unknown, extra: Partial<Operation> = {}): Operation {
  const op: Record<string, unknown> = { name, ...extra };
  if (hook === 'beforeModelCall') op.beforeModelCall = (ctx: HookContext) => body(ctx);
  if (hook === 'afterReply') op.afterReply = (_reply: unknown, ctx: HookContext) => body(ctx);
  if (hook === 'beforeTools') op.beforeTools = (_calls: unknown, ctx: HookContext) => body(ctx);
  return op as unknown as Operation;
}

describe('async hooks at every point, in the order a turn reaches them', () => {
  it('each point awaits its hooks in list order before the step goes on; every hook goes through the executor with its own key', async () => {
    const log: string[] = [];
    const model = recording(script());
    const slow = (name: string): Operation => ({
      name,
      async beforeModelCall(ctx) {
        await sleepOrAbort(5, ctx.signal);
        log.push(`${name}:beforeModelCall:${ctx.turn}:seen-model-calls=${model.seen.length}`);
      },
      async afterReply(reply, ctx) {
        await sleepOrAbort(5, ctx.signal);
        log.push(`${name}:afterReply:${ctx.turn}:${reply.finishReason}`);
      },
      async beforeTools(calls, ctx) {
        await sleepOrAbort(5, ctx.signal);
        log.push(`${name}:beforeTools:${ctx.turn}:${calls.map((c) => c.call.name).join(',')}`);
      },
    });
    const effects: string[] = [];
    const executor: Executor = (effect, perform) => {
      if (effect.kind === 'operation') effects.push(effect.key);
      return perform();
    };
    const machine = createAgentMachine({ model, tools: [echoTool], operations: [slow('a'), slow('b')], executor });
    const output = await runToCompletion(createActor(machine, { input: { prompt: 'go', sessionId: 's' } }));
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    expect(log).toEqual([
      'a:beforeModelCall:1:seen-model-calls=0',
      'b:beforeModelCall:1:seen-model-calls=0',
      'a:afterReply:1:tool-calls',
      'b:afterReply:1:tool-calls',
      'a:beforeTools:1:echo',
      'b:beforeTools:1:echo',
      'a:beforeModelCall:2:seen-model-calls=1',
      'b:beforeModelCall:2:seen-model-calls=1',
      'a:afterReply:2:stop',
      'b:afterReply:2:stop',
    ]);
    expect(effects).toEqual([
      's:run-1:turn-1:model:before:a',
      's:run-1:turn-1:model:before:b',
      's:run-1:turn-1:model:after:a',
      's:run-1:turn-1:model:after:b',
      's:run-1:turn-1:tools:before:a',
      's:run-1:turn-1:tools:before:b',
      's:run-1:turn-2:model:before:a',
      's:run-1:turn-2:model:before:b',
      's:run-1:turn-2:model:after:a',
      's:run-1:turn-2:model:after:b',
    ]);
  });

  it.each(OPERATION_HOOKS)('%s: a cancel aborts the running hook and the run ends Cancelled, coherent', async (hook) => {
    let signal: AbortSignal | undefined;
    const entered = deferred();
    const op = opAt(hook, 'waits', (ctx) => {
      signal = ctx.signal;
      entered.resolve();
      return sleepOrAbort(60_000, ctx.signal);
    });
    const actor = createActor(createAgentMachine({ model: script(), tools: [echoTool], operations: [op] }), { input: { prompt: 'go' } }).start();
    await entered.promise;
    expect(actor.getSnapshot().value).toEqual({ Running: 'Operating' });
    actor.send({ type: 'cancel' });
    const done = await waitFor(actor, (s) => s.status === 'done', { timeout: WAIT_MS });
    expect(signal!.aborted).toBe(true);
    expect(done.output!.outcome).toEqual({ type: 'Cancelled' });
    // The committed conversation stays provider-valid: a call in the batch got its interrupted result.
    const calls = done.output!.messages.flatMap((m) => (m.role === 'assistant' ? (m.toolCalls ?? []) : []));
    const results = done.output!.messages.filter((m) => m.role === 'tool');
    expect(results).toHaveLength(calls.length);
  });

  it.each(OPERATION_HOOKS)('%s: a hook past its timeout is aborted and fails the run with OperationError naming it', async (hook) => {
    let signal: AbortSignal | undefined;
    const op = opAt(hook, 'slowpoke', (ctx) => {
      signal = ctx.signal;
      return new Promise(() => {}); // ignores its signal: the timeout still ends it
    }, { timeoutMs: 40 });
    const emitted: AgentEmitted[] = [];
    const actor = createActor(createAgentMachine({ model: script(), tools: [echoTool], operations: [op] }), { input: { prompt: 'go' } });
    actor.on('operation.failed', (event) => emitted.push(event));
    const started = performance.now();
    const output = await runToCompletion(actor);
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(output.outcome).toEqual({
      type: 'Failed',
      error: { type: 'OperationError', message: `operation 'slowpoke' ${hook}: timed out after 40 ms` },
    });
    expect(signal!.aborted).toBe(true);
    expect(OperationError.isInstance(signal!.reason)).toBe(true);
    expect(emitted).toHaveLength(1);
    const failed = emitted[0] as Extract<AgentEmitted, { type: 'operation.failed' }>;
    expect(failed.operation).toBe('slowpoke');
    expect(OperationError.isInstance(failed.error) && failed.error.code).toBe('OperationFailed');
  });

  // setTimeout cuts a delay past 2^31 - 1 ms (24.8 days) to 1 ms: before, a hook given 40 days
  // failed the run at once ('timed out after 3456000000 ms'). Past that bound a timeout is none.
  it.each(OPERATION_HOOKS)('%s: a timeout longer than a timer can wait is no timeout: the hook that returns in 50 ms is awaited', async (hook) => {
    let returned = false;
    const op = opAt(hook, 'patient', () => new Promise<void>((resolve) => setTimeout(() => ((returned = true), resolve()), 50)), { timeoutMs: 40 * 24 * 3_600_000 });
    const output = await runToCompletion(createActor(createAgentMachine({ model: script(), tools: [echoTool], operations: [op] }), { input: { prompt: 'go' } }));
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    expect(returned).toBe(true);
  });

  it.each(OPERATION_HOOKS)('%s: a hook that throws (async) fails the run with OperationError naming it; the session actor lives on', async (hook) => {
    const op = opAt(hook, 'broken', async () => {
      await null;
      throw new Error('memory service down');
    });
    const actor = createActor(
      createAgentMachine({ model: scriptedModel([{ toolCalls: [{ name: 'echo', args: { text: 'x' } }] }, { text: 'done' }, { text: 'again' }]), tools: [echoTool], operations: [op] }),
    ).start();
    actor.send({ type: 'input', message: 'go' });
    const idle = await waitFor(actor, (s) => s.matches('Idle') && s.context.runIndex === 1, { timeout: WAIT_MS });
    expect(idle.context.lastRun!.outcome).toEqual({
      type: 'Failed',
      error: { type: 'OperationError', message: `operation 'broken' ${hook}: threw: memory service down` },
    });
    expect(actor.getSnapshot().status).toBe('active');
  });

  it('a hook that returns something that is not effects fails the run naming the operation', async () => {
    const op = opAt('beforeModelCall', 'legacy', () => ({ messages: [], tools: [] }));
    const output = await runToCompletion(createActor(createAgentMachine({ model: script(), operations: [op] }), { input: { prompt: 'go' } }));
    expect(output.outcome.type).toBe('Failed');
    expect((output.outcome as { error: { message: string } }).error.message).toMatch(/^operation 'legacy' beforeModelCall: returned something that is not effects/);
  });

  // Getters written in a literal were new functions per hook call, and V8 gave every context a
  // dictionary of its own (a hidden class made per call, in the old generation).
  it("a hook's context has its messages and signal as own, enumerable fields, read through getters every context shares", async () => {
    const seen: HookContext[] = [];
    const op = opAt('beforeModelCall', 'watch', (ctx) => void seen.push(ctx));
    const model = scriptedModel([{ toolCalls: [{ name: 'echo', args: { text: 'a' } }] }, { text: 'done' }]);
    const output = await runToCompletion(createActor(createAgentMachine({ model, tools: [echoTool], operations: [op] }), { input: { prompt: 'go' } }));
    expect(output.outcome.type).toBe('Completed');
    expect(seen).toHaveLength(2);
    const [first, second] = seen.map((ctx) => Object.getOwnPropertyDescriptors(ctx));
    expect(Object.keys(seen[0]!)).toEqual(['sessionId', 'scope', 'turn', 'messages', 'state', 'signal']);
    for (const field of ['messages', 'signal'] as const) {
      expect(first![field]!.enumerable, field).toBe(true);
      expect(first![field]!.get, field).toBe(second![field]!.get);
    }
    // Read late, each still sees its own call's conversation.
    expect(seen.map((ctx) => ctx.messages.length)).toEqual([1, 3]);
    expect(seen[0]!.signal).not.toBe(seen[1]!.signal);
  });
});

describe('state slices', () => {
  const counter = (overrides: Partial<Operation<{ replies: number }>> = {}): Operation<{ replies: number }> => ({
    name: 'counter',
    state: { schema: z.object({ replies: z.number().int() }), initial: { replies: 0 } },
    prompt: (ctx) => `replies so far: ${ctx.state.replies}`,
    async afterReply(_reply, ctx) {
      return { state: { replies: ctx.state.replies + 1 } };
    },
    ...overrides,
  });

  it('a slice changes only through returned effects, is read by prompt parts, and persists in the snapshot', async () => {
    const model = recording(script());
    const actor = createActor(createAgentMachine({ model, tools: [echoTool], operations: [counter()] }), { input: { prompt: 'go' } });
    await runToCompletion(actor);
    expect(model.seen.map((r) => r.messages[0])).toEqual([
      { role: 'system', content: 'replies so far: 0' },
      { role: 'system', content: 'replies so far: 1' },
    ]);
    expect(actor.getSnapshot().context.operations.slices).toEqual({ counter: { replies: 2 } });
    const persisted = JSON.parse(JSON.stringify(actor.getPersistedSnapshot())) as { context: { operations: { slices: object } } };
    expect(persisted.context.operations.slices).toEqual({ counter: { replies: 2 } });
  });

  it('a returned slice its schema refuses fails the run naming the operation; nothing of it is kept', async () => {
    const op = counter({ afterReply: async () => ({ state: { replies: 'many' } as never }) });
    const actor = createActor(createAgentMachine({ model: script(), tools: [echoTool], operations: [op] }), { input: { prompt: 'go' } });
    const output = await runToCompletion(actor);
    expect(output.outcome.type).toBe('Failed');
    expect((output.outcome as { error: { message: string } }).error.message).toMatch(/^operation 'counter' afterReply: returned state that does not match its schema/);
    expect(actor.getSnapshot().context.operations.slices).toEqual({});
  });

  it('a persisted snapshot whose slice the schema refuses is refused on restore with OperationStateError naming the operation', async () => {
    const machine = createAgentMachine({ model: script(), tools: [echoTool], operations: [counter()] });
    const actor = createActor(machine, { input: { prompt: 'go' } });
    await runToCompletion(actor);
    const snapshot = JSON.parse(JSON.stringify(actor.getPersistedSnapshot()));
    snapshot.context.operations.slices.counter = { replies: -0.5 };
    const errorOf = (actor: ReturnType<typeof createActor<typeof machine>>) => {
      expect(actor.getSnapshot().status).toBe('error');
      return (actor.getSnapshot() as { error?: unknown }).error;
    };
    const caught = errorOf(createActor(machine, { snapshot }));
    expect(OperationStateError.isInstance(caught)).toBe(true);
    expect((caught as OperationStateError).operation).toBe('counter');
    expect((caught as Error).message).toMatch(/^operation 'counter': stored state does not match its schema/);
    // A stored state given as input is checked the same way.
    expect(OperationStateError.isInstance(errorOf(createActor(machine, { input: { stored: snapshot.context } })))).toBe(true);
    // A slice that is not JSON at all is the snapshot's own problem.
    snapshot.context.operations.slices.counter = { replies: 1, when: new Date() };
    expect(errorOf(createActor(machine, { snapshot }))).toBeInstanceOf(InvalidSnapshotError);
  });
});
