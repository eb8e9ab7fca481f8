/** cancel and seal during a run: in-flight IO aborted, history coherent and provider-valid afterwards. */
import { describe, expect, it, vi } from 'vitest';
import { createActor } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { type AgentOutput } from '../../../src/agent/protocol/actor-types.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import type { Message, ToolMessage } from '../../../src/schemas.js';
import { INTERRUPTED_CONTENT } from '../../../src/tools/run-tools.js';
import {
  echoTool,
  providerValid,
  recording,
  runFinished,
  runInSession,
  runToCompletion,
  tick,
  waitForRunning,
  waitTool,
} from '../../support/driver.js';

const user = (content: string): Message => ({ role: 'user', content });
const echoResult = (id: string, content: string): ToolMessage => ({ role: 'tool', toolCallId: id, toolName: 'echo', content });
const interrupted = (id: string, toolName: string): ToolMessage => ({
  role: 'tool',
  toolCallId: id,
  toolName,
  content: INTERRUPTED_CONTENT,
  isError: true,
});

const a1: Message = { role: 'assistant', content: 'first', toolCalls: [{ id: 'call_1_0', name: 'echo', args: { text: 'x' } }] };
const r1 = echoResult('call_1_0', 'x');

/** Turn 1 calls echo; turn 2 takes a minute to answer (room to stop it). */
function slowSecondTurn() {
  let signal: AbortSignal | undefined;
  const model = recording(
    scriptedModel([
      { text: 'first', toolCalls: [{ name: 'echo', args: { text: 'x' } }], usage: { inputTokens: 10, outputTokens: 2 } },
      (request) => {
        signal = request.signal;
        return { text: 'too late', delayMs: 60_000 };
      },
    ]),
  );
  return { model, signal: () => signal };
}

/** Turn 1 calls echo (fast) and wait (a minute, honours its signal). */
function slowTools() {
  const { tool, stats } = waitTool();
  const model = recording(
    scriptedModel([
      {
        text: 'two tools',
        toolCalls: [
          { name: 'echo', args: { text: 'fast' } },
          { name: 'wait', args: { ms: 60_000, label: 'slow' } },
        ],
      },
      { text: 'resumed' },
    ]),
  );
  const a: Message = {
    role: 'assistant',
    content: 'two tools',
    toolCalls: [
      { id: 'call_1_0', name: 'echo', args: { text: 'fast' } },
      { id: 'call_1_1', name: 'wait', args: { ms: 60_000, label: 'slow' } },
    ],
  };
  return { model, tool, stats, a };
}

describe('cancel', () => {
  it('during the model call: the call is aborted, the finished turn is kept, outcome Cancelled', async () => {
    const { model, signal } = slowSecondTurn();
    const actor = createActor(createAgentMachine({ model, tools: [echoTool] }), { input: { prompt: 'go' } });
    const finished: AgentOutput[] = [];
    actor.on('run.finished', (e) => finished.push(e.output));
    actor.start();
    await waitForRunning(actor, 'AwaitingModel', 1);
    expect(model.seen).toHaveLength(2);
    const started = Date.now();
    actor.send({ type: 'cancel' });
    const output = await runToCompletion(actor);

    expect(Date.now() - started).toBeLessThan(2_000);
    expect(signal()?.aborted).toBe(true);
    expect(output).toEqual({
      outcome: { type: 'Cancelled' },
      messages: [user('go'), a1, r1],
      usage: { inputTokens: 10, outputTokens: 2 },
    });
    expect(providerValid(output.messages)).toBe(true);
    expect(finished).toEqual([output]);
  });

  it('during the first model call: only the prompt is kept', async () => {
    let signal: AbortSignal | undefined;
    const model = scriptedModel([
      (request) => {
        signal = request.signal;
        return { text: 'too late', delayMs: 60_000 };
      },
    ]);
    const actor = createActor(createAgentMachine({ model }), { input: { prompt: 'go' } });
    actor.start();
    await waitForRunning(actor, 'AwaitingModel', 0);
    actor.send({ type: 'cancel' });
    const output = await runToCompletion(actor);
    expect(signal?.aborted).toBe(true);
    expect(output).toEqual({ outcome: { type: 'Cancelled' }, messages: [user('go')], usage: { inputTokens: 0, outputTokens: 0 } });
  });

  it('during tools: finished results kept, the unfinished call interrupted and aborted; the next run is provider-valid', async () => {
    const { model, tool, stats, a } = slowTools();
    const actor = createActor(createAgentMachine({ model, tools: [echoTool, tool] }), { input: { sessionId: 'c1' } });
    const finished: string[] = [];
    actor.on('tool.finished', (e) => {
      finished.push(e.call.id);
      if (e.call.name === 'echo') actor.send({ type: 'cancel' });
    });
    actor.start();
    actor.send({ type: 'input', message: 'go' });
    const output = await runFinished(actor, 1);

    const expected = [user('go'), a, echoResult('call_1_0', 'fast'), interrupted('call_1_1', 'wait')];
    expect(output.outcome).toEqual({ type: 'Cancelled' });
    expect(output.messages).toEqual(expected);
    expect(providerValid(output.messages)).toBe(true);
    expect(actor.getSnapshot().value).toBe('Idle');
    expect(actor.getSnapshot().context.brain.context.history).toEqual(expected);
    await tick(10);
    expect(stats.signals.get('call_1_1')?.aborted).toBe(true);
    expect(stats.aborted).toEqual(['slow']);
    expect(stats.finished).toEqual([]);
    expect(finished).toEqual(['call_1_0']);

    const next = await runInSession(actor, 'continue');
    expect(model.seen.at(-1)!.messages).toEqual([...expected, user('continue')]);
    expect(providerValid(model.seen.at(-1)!.messages)).toBe(true);
    expect(next.outcome).toEqual({ type: 'Completed', finalText: 'resumed' });
    expect(next.messages).toEqual([...expected, user('continue'), { role: 'assistant', content: 'resumed' }]);
  });

  it('during tools in a single run: the aborted tools report nothing to the finished actor (no console noise)', async () => {
    const { model, tool } = slowTools();
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const error = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      const actor = createActor(createAgentMachine({ model, tools: [echoTool, tool] }), { input: { prompt: 'go' } });
      actor.on('tool.finished', (e) => {
        if (e.call.name === 'echo') actor.send({ type: 'cancel' });
      });
      const output = await runToCompletion(actor);
      expect(output.outcome).toEqual({ type: 'Cancelled' });
      await tick(10);
      expect([...warn.mock.calls, ...error.mock.calls].map((args) => String(args[0]))).toEqual([]);
    } finally {
      warn.mockRestore();
      error.mockRestore();
    }
  });

  it('in a session while Idle does nothing', async () => {
    const actor = createActor(createAgentMachine({ model: scriptedModel([{ text: 'hi' }]) }));
    actor.start();
    actor.send({ type: 'cancel' });
    expect(actor.getSnapshot().value).toBe('Idle');
    expect(actor.getSnapshot().context.runIndex).toBe(0);
    const output = await runInSession(actor, 'hello');
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'hi' });
  });
});

describe('seal', () => {
  it('during tools: Sealed with the reason, unfinished calls interrupted, history coherent', async () => {
    const { model, tool, stats, a } = slowTools();
    const actor = createActor(createAgentMachine({ model, tools: [echoTool, tool] }), { input: { prompt: 'go' } });
    actor.on('tool.finished', (e) => {
      if (e.call.name === 'echo') actor.send({ type: 'seal', reason: 'budget spent' });
    });
    // The late-report warning has its own test above; keep this one's output quiet.
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const output = await runToCompletion(actor).finally(() => tick(10).then(() => warn.mockRestore()));
    expect(output.outcome).toEqual({ type: 'Sealed', reason: 'budget spent' });
    expect(output.messages).toEqual([user('go'), a, echoResult('call_1_0', 'fast'), { ...interrupted('call_1_1', 'wait'), content: 'interrupted: the run was stopped (budget spent) before this tool call finished' }]);
    expect(providerValid(output.messages)).toBe(true);
    await tick(10);
    expect(stats.signals.get('call_1_1')?.aborted).toBe(true);
    expect(model.seen).toHaveLength(1);
  });

  it('during the model call: Sealed, the call aborted, the completed turns kept', async () => {
    const { model, signal } = slowSecondTurn();
    const actor = createActor(createAgentMachine({ model, tools: [echoTool] }), { input: { prompt: 'go' } });
    actor.start();
    await waitForRunning(actor, 'AwaitingModel', 1);
    actor.send({ type: 'seal', reason: 'handing over' });
    const output = await runToCompletion(actor);
    expect(signal()?.aborted).toBe(true);
    expect(output.outcome).toEqual({ type: 'Sealed', reason: 'handing over' });
    expect(output.messages).toEqual([user('go'), a1, r1]);
  });
});
