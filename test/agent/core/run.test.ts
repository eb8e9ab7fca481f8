/** End-to-end runs of the driver with the scripted model and real tools: replies, tools, events, limits. */
import { describe, expect, it } from 'vitest';
import { createActor, waitFor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { type AgentEmitted } from '../../../src/agent/protocol/actor-types.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import type { Message, ToolMessage } from '../../../src/schemas.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { INTERRUPTED_CONTENT } from '../../../src/tools/run-tools.js';
import {
  addTool,
  echoTool,
  providerValid,
  recording,
  runToCompletion,
  sleepOrAbort,
  waitTool,
} from '../../support/driver.js';

const user = (content: string): Message => ({ role: 'user', content });
const result = (toolCallId: string, toolName: string, content: string, isError?: true): ToolMessage =>
  isError ? { role: 'tool', toolCallId, toolName, content, isError } : { role: 'tool', toolCallId, toolName, content };

describe('a completed run with tools', () => {
  function setup() {
    const model = recording(
      scriptedModel([
        {
          text: 'Let me add.',
          toolCalls: [
            { name: 'add', args: { a: 2, b: 3 } },
            { name: 'echo', args: { text: 'hi' } },
          ],
          usage: { inputTokens: 100, outputTokens: 10 },
        },
        (request) => {
          const sum = request.messages.find((m) => m.role === 'tool' && m.toolName === 'add')!.content;
          return { text: `The sum is ${sum}.`, usage: { inputTokens: 150, outputTokens: 8 } };
        },
      ]),
    );
    const machine = createAgentMachine({ model, tools: [addTool, echoTool] });
    return { model, machine };
  }

  const expectedMessages: Message[] = [
    user('What is 2 + 3?'),
    {
      role: 'assistant',
      content: 'Let me add.',
      toolCalls: [
        { id: 'call_1_0', name: 'add', args: { a: 2, b: 3 } },
        { id: 'call_1_1', name: 'echo', args: { text: 'hi' } },
      ],
    },
    result('call_1_0', 'add', '5'),
    result('call_1_1', 'echo', 'hi'),
    { role: 'assistant', content: 'The sum is 5.' },
  ];

  it('finishes with outcome, committed messages and summed usage; the history is provider-valid', async () => {
    const { machine, model } = setup();
    const actor = createActor(machine, { input: { prompt: 'What is 2 + 3?', sessionId: 's1' } });
    const output = await runToCompletion(actor);

    expect(output).toEqual({
      outcome: { type: 'Completed', finalText: 'The sum is 5.' },
      messages: expectedMessages,
      usage: { inputTokens: 250, outputTokens: 18 },
    });
    expect(providerValid(output.messages)).toBe(true);
    expect(actor.getSnapshot().status).toBe('done');
    expect(actor.getSnapshot().value).toBe('Done');

    // What the model was sent: the whole conversation so far, the tool definitions, a stable key per turn.
    expect(model.seen.map((r) => r.messages)).toEqual([expectedMessages.slice(0, 1), expectedMessages.slice(0, 4)]);
    expect(model.seen.map((r) => r.toolNames)).toEqual([
      ['add', 'echo'],
      ['add', 'echo'],
    ]);
    expect(model.seen.map((r) => r.idempotencyKey)).toEqual(['s1:run-1:turn-1:model', 's1:run-1:turn-2:model']);
  });

  it('emits text deltas, tool start/finish, turn ends and the run end, in order', async () => {
    const { machine } = setup();
    const actor = createActor(machine, { input: { prompt: 'What is 2 + 3?' } });
    const events: AgentEmitted[] = [];
    actor.on('*', (event) => events.push(event as AgentEmitted));
    const output = await runToCompletion(actor);

    const summary = events.map((e) => {
      switch (e.type) {
        case 'text.delta':
          return `delta(${e.turn}):${e.delta}`;
        case 'tool.started':
          return `started:${e.call.id}`;
        case 'tool.finished':
          return `finished:${e.call.id}=${e.result.content}`;
        case 'turn.finished':
          return `turn:${e.turn}:${e.reply.finishReason}`;
        case 'compaction.finished':
          return 'compaction';
        case 'run.finished':
          return `run:${e.output.outcome.type}`;
        case 'run.started':
          return `start:${e.run}:${e.message.content}`;
      }
    });
    expect(summary).toEqual([
      'start:1:What is 2 + 3?',
      'delta(1):Let me a',
      'delta(1):dd.',
      'turn:1:tool-calls',
      // Both calls start together (parallel), then finish.
      'started:call_1_0',
      'started:call_1_1',
      'finished:call_1_0=5',
      'finished:call_1_1=hi',
      'delta(2):The sum ',
      'delta(2):is 5.',
      'turn:2:stop',
      'run:Completed',
    ]);
    const finished = events.find((e) => e.type === 'turn.finished')!;
    expect(finished.type === 'turn.finished' && finished.reply.usage).toEqual({ inputTokens: 100, outputTokens: 10 });
    const run = events.at(-1)!;
    expect(run.type === 'run.finished' && run.output).toEqual(output);
  });

  it('an actor given no session id has one of its own: its keys are never another actor\'s, and a restore keeps them', async () => {
    const model = recording(scriptedModel([{ text: 'one' }, { text: 'two' }, { text: 'three' }]));
    const machine = createAgentMachine({ model });
    const ranOnce = async (actor: ReturnType<typeof createActor<typeof machine>>, message: string, runIndex: number) => {
      actor.send({ type: 'input', message });
      await waitFor(actor, (s) => s.matches('Idle') && s.context.runIndex === runIndex, { timeout: 2_000 });
    };
    const alice = createActor(machine).start();
    const bob = createActor(machine).start();
    await ranOnce(alice, 'Alice: charge my card', 1);
    await ranOnce(bob, 'Bob: charge my card', 1);
    const [aliceKey, bobKey] = model.seen.map((r) => r.idempotencyKey);
    // Before: both were 'session:run-1:turn-1:model', so an API that deduplicates answered Bob with Alice's result.
    expect(aliceKey).toMatch(/^actor-[0-9a-f-]{36}:run-1:turn-1:model$/);
    expect(bobKey).toMatch(/^actor-[0-9a-f-]{36}:run-1:turn-1:model$/);
    expect(bobKey).not.toBe(aliceKey);
    const restored = createActor(machine, { snapshot: JSON.parse(JSON.stringify(bob.getPersistedSnapshot())) }).start();
    await ranOnce(restored, 'again', 2);
    expect(model.seen[2]!.idempotencyKey).toBe(bobKey!.replace('run-1', 'run-2'));
    for (const actor of [alice, bob, restored]) actor.stop();
  });

  it('uses the given session id in idempotency keys and continues from input history', async () => {
    // The scripted model picks its entry by the assistant messages sent: one in history → entry 2.
    const model = recording(scriptedModel([{ text: 'not this one' }, { text: 'ok' }]));
    const history: Message[] = [{ role: 'system', content: 'be terse' }, user('earlier'), { role: 'assistant', content: 'noted' }];
    const output = await runToCompletion(
      createActor(createAgentMachine({ model }), { input: { sessionId: 'trip', prompt: { role: 'user', content: 'again' }, history } }),
    );
    expect(model.seen.map((r) => r.messages)).toEqual([[...history, user('again')]]);
    expect(model.seen.map((r) => r.idempotencyKey)).toEqual(['trip:run-1:turn-1:model']);
    expect(model.seen[0]!.toolNames).toEqual([]);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'ok' });
    expect(output.messages).toEqual([...history, user('again'), { role: 'assistant', content: 'ok' }]);
  });
});

describe('tool problems become isError results and the loop goes on', () => {
  it('unknown tool: the call is pre-answered, the model corrects itself', async () => {
    const add = { ...addTool };
    const executions: unknown[] = [];
    const countingAdd = defineTool({
      name: 'add',
      description: add.description,
      input: z.object({ a: z.number(), b: z.number() }),
      execute: (args) => {
        executions.push(args);
        return String(args.a + args.b);
      },
    });
    const model = recording(
      scriptedModel([
        { toolCalls: [{ name: 'multiply', args: { a: 2, b: 3 } }] },
        (request) => {
          const last = request.messages.at(-1)!;
          return last.role === 'tool' && last.isError
            ? { text: 'Multiply is missing; adding instead.', toolCalls: [{ name: 'add', args: { a: 2, b: 3 } }] }
            : { text: 'unexpected' };
        },
        { text: 'Done: 5.' },
      ]),
    );
    const output = await runToCompletion(
      createActor(createAgentMachine({ model, tools: [countingAdd] }), { input: { prompt: 'compute' } }),
    );
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'Done: 5.' });
    expect(output.messages).toEqual([
      user('compute'),
      { role: 'assistant', content: '', toolCalls: [{ id: 'call_1_0', name: 'multiply', args: { a: 2, b: 3 } }] },
      result('call_1_0', 'multiply', "tool 'multiply' is not available", true),
      {
        role: 'assistant',
        content: 'Multiply is missing; adding instead.',
        toolCalls: [{ id: 'call_2_0', name: 'add', args: { a: 2, b: 3 } }],
      },
      result('call_2_0', 'add', '5'),
      { role: 'assistant', content: 'Done: 5.' },
    ]);
    expect(executions).toEqual([{ a: 2, b: 3 }]);
    expect(providerValid(output.messages)).toBe(true);
  });

  it('invalid arguments: an isError result names the zod issue, and the corrected call runs', async () => {
    const model = scriptedModel([
      { toolCalls: [{ name: 'add', args: { a: 'two', b: 3 } }] },
      { toolCalls: [{ name: 'add', args: { a: 2, b: 3 } }] },
      { text: '5' },
    ]);
    const output = await runToCompletion(
      createActor(createAgentMachine({ model, tools: [addTool] }), { input: { prompt: 'add' } }),
    );
    expect(output.outcome).toEqual({ type: 'Completed', finalText: '5' });
    expect(output.messages[2]).toEqual(
      result('call_1_0', 'add', 'invalid arguments for tool "add":\n- a: Invalid input: expected number, received string', true),
    );
    expect(output.messages[4]).toEqual(result('call_2_0', 'add', '5'));
    expect(output.messages).toHaveLength(6);
    expect(providerValid(output.messages)).toBe(true);
  });

  it('a tool that throws: its message becomes an isError result', async () => {
    const explode = defineTool({
      name: 'explode',
      description: 'always fails',
      input: z.object({}),
      execute: async () => {
        throw new Error('disk on fire');
      },
    });
    const model = scriptedModel([
      { toolCalls: [{ name: 'explode', args: {} }, { name: 'echo', args: { text: 'still here' } }] },
      { text: 'The disk is on fire.' },
    ]);
    const output = await runToCompletion(
      createActor(createAgentMachine({ model, tools: [explode, echoTool] }), { input: { prompt: 'go' } }),
    );
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'The disk is on fire.' });
    expect(output.messages.slice(2, 4)).toEqual([
      result('call_1_0', 'explode', 'disk on fire', true),
      result('call_1_1', 'echo', 'still here'),
    ]);
    expect(providerValid(output.messages)).toBe(true);
  });

  it('a tool that times out: an isError result, its signal aborted with a TimeoutError', async () => {
    let seen: AbortSignal | undefined;
    const slow = defineTool({
      name: 'slow',
      description: 'takes forever',
      input: z.object({}),
      timeoutMs: 30,
      execute: async (_args, { signal }) => {
        seen = signal;
        await sleepOrAbort(60_000, signal);
        return 'never';
      },
    });
    const model = scriptedModel([{ toolCalls: [{ name: 'slow', args: {} }] }, { text: 'It timed out.' }]);
    const started = Date.now();
    const output = await runToCompletion(
      createActor(createAgentMachine({ model, tools: [slow] }), { input: { prompt: 'go' } }),
    );
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'It timed out.' });
    expect(output.messages[2]).toEqual(result('call_1_0', 'slow', 'tool "slow" timed out after 30 ms', true));
    expect(seen?.aborted).toBe(true);
    expect((seen?.reason as Error).name).toBe('TimeoutError');
  });
});

describe('parallel tools', () => {
  const calls = (n: number, ms: (i: number) => number) =>
    Array.from({ length: n }, (_, i) => ({ name: 'wait', args: { ms: ms(i), label: `L${i}` } }));

  it('observe the configured limit and come back in call order', async () => {
    const { tool, stats } = waitTool();
    const durations = [40, 10, 30, 5, 20];
    const model = scriptedModel([{ toolCalls: calls(5, (i) => durations[i]!) }, { text: 'all waited' }]);
    const actor = createActor(createAgentMachine({ model, tools: [tool], toolConcurrency: 2 }), { input: { prompt: 'go' } });
    const finishedOrder: string[] = [];
    actor.on('tool.finished', (e) => finishedOrder.push(e.call.id));
    const output = await runToCompletion(actor);

    expect(stats.maxActive).toBe(2);
    expect(stats.started).toEqual(['L0', 'L1', 'L2', 'L3', 'L4']);
    // Finished out of order, fed in call order.
    expect(finishedOrder).not.toEqual(['call_1_0', 'call_1_1', 'call_1_2', 'call_1_3', 'call_1_4']);
    expect(output.messages.slice(2, 7)).toEqual(
      Array.from({ length: 5 }, (_, i) => result(`call_1_${i}`, 'wait', `waited L${i}`)),
    );
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'all waited' });
  });

  it('default to 4 at once', async () => {
    const { tool, stats } = waitTool();
    const model = scriptedModel([{ toolCalls: calls(6, () => 20) }, { text: 'ok' }]);
    const output = await runToCompletion(createActor(createAgentMachine({ model, tools: [tool] }), { input: { prompt: 'go' } }));
    expect(stats.maxActive).toBe(4);
    expect(stats.finished).toHaveLength(6);
    expect(output.messages).toHaveLength(9);
    expect(providerValid(output.messages)).toBe(true);
  });
});

describe('max turns', () => {
  const loopingScript = () =>
    scriptedModel([1, 2, 3, 4].map((i) => ({ text: `step ${i}`, toolCalls: [{ name: 'echo', args: { text: `r${i}` } }] })));

  const expectedPartial: Message[] = [
    user('loop'),
    { role: 'assistant', content: 'step 1', toolCalls: [{ id: 'call_1_0', name: 'echo', args: { text: 'r1' } }] },
    result('call_1_0', 'echo', 'r1'),
    { role: 'assistant', content: 'step 2', toolCalls: [{ id: 'call_2_0', name: 'echo', args: { text: 'r2' } }] },
    result('call_2_0', 'echo', 'r2'),
  ];

  it('ends MaxTurnsExceeded with the coherent partial output salvaged (input policy)', async () => {
    const model = recording(loopingScript());
    const output = await runToCompletion(
      createActor(createAgentMachine({ model, tools: [echoTool] }), { input: { prompt: 'loop', policy: { maxTurns: 2 } } }),
    );
    expect(output.outcome).toEqual({ type: 'MaxTurnsExceeded' });
    expect(output.messages).toEqual(expectedPartial);
    expect(providerValid(output.messages)).toBe(true);
    expect(model.seen).toHaveLength(2);
  });

  it('the starting policy given in the config is honoured', async () => {
    const model = recording(loopingScript());
    const machine = createAgentMachine({ model, tools: [echoTool], policy: { maxTurns: 2 } });
    const actor = createActor(machine, { input: { prompt: 'loop' } });
    actor.start();
    expect(actor.getSnapshot().context.policy.maxTurns).toBe(2);
    const output = await runToCompletion(actor);
    expect(output.outcome).toEqual({ type: 'MaxTurnsExceeded' });
    expect(output.messages).toEqual(expectedPartial);
  });

  it('with maxTurns 1 the tools of the last turn still run: the reply and its results are kept together', async () => {
    const output = await runToCompletion(
      createActor(createAgentMachine({ model: loopingScript(), tools: [echoTool] }), {
        input: { prompt: 'loop', policy: { maxTurns: 1 } },
      }),
    );
    expect(output.messages).toEqual(expectedPartial.slice(0, 3));
    expect(output.messages.some((m) => m.role === 'tool' && m.content === INTERRUPTED_CONTENT)).toBe(false);
  });
});
