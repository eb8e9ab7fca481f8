/** Threshold and emergency compaction through the compactor service, the deferred latch, stalls. */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { createAgentMachine, type AgentActor } from '../../../machines/agent.machine.js';
import { type AgentEmitted } from '../../../src/agent/protocol/actor-types.js';
import type { CompactionRequest, CompactionResult, Compactor } from '../../../src/compaction/contract.js';
import type { Model } from '../../../src/model.js';
import { scriptedModel, type ScriptEntry } from '../../../src/models/scripted.js';
import type { AssistantMessage, Message, ToolMessage } from '../../../src/schemas.js';
import { estimateMessageTokens, estimateTokens, estimateToolTokens } from '../../../src/tokens.js';
import {
  echoTool,
  providerValid,
  recording,
  runInSession,
  runToCompletion,
  waitForRunning,
} from '../../support/driver.js';

const user = (content: string): Message => ({ role: 'user', content });
const echoResult = (id: string, content: string): ToolMessage => ({ role: 'tool', toolCallId: id, toolName: 'echo', content });
const a1: Message = { role: 'assistant', content: '', toolCalls: [{ id: 'call_1_0', name: 'echo', args: { text: 'x' } }] };
const r1 = echoResult('call_1_0', 'x');
/** contextTokens after turn 1's results: the reply's reported usage plus the result as one more message (the request's priming is in the usage already). */
const afterResults = (usage: number) => usage + estimateMessageTokens(r1);

interface SeenCompaction {
  messages: Message[];
  reason: string;
  tokensBefore: number;
  modelName: string;
  signal: AbortSignal;
}

function recordingCompactor(answer: (request: CompactionRequest) => CompactionResult | Promise<CompactionResult>) {
  const seen: SeenCompaction[] = [];
  const compactor: Compactor = async (request) => {
    seen.push({
      messages: structuredClone([...request.messages]),
      reason: request.reason,
      tokensBefore: request.tokensBefore,
      modelName: request.model.name,
      signal: request.signal,
    });
    return answer(request);
  };
  return { compactor, seen };
}

/** Keeps the shape, replaces every tool result's content: a pruning compaction the script survives. */
const pruneTools =
  (tokensAfter: number) =>
  ({ messages }: CompactionRequest): CompactionResult => ({
    messages: messages.map((m) => (m.role === 'tool' ? { ...m, content: '[pruned]' } : m)),
    tokensAfter,
  });

function collect(actor: AgentActor) {
  const events: AgentEmitted[] = [];
  actor.on('*', (e) => void events.push(e as AgentEmitted));
  return events;
}

describe('threshold compaction', () => {
  it('runs the compactor above compactThreshold, adopts its messages and continues', async () => {
    const model = recording(
      scriptedModel([
        { toolCalls: [{ name: 'echo', args: { text: 'x' } }], usage: { inputTokens: 840, outputTokens: 10 } },
        { text: 'done', usage: { inputTokens: 320, outputTokens: 5 } },
      ]),
    );
    const { compactor, seen } = recordingCompactor(pruneTools(300));
    const machine = createAgentMachine({ model, tools: [echoTool], compactor });
    const actor = createActor(machine, { input: { prompt: 'fill', policy: { contextWindow: 1000 } } });
    const events = collect(actor);
    const output = await runToCompletion(actor);

    const before = afterResults(850);
    expect(before * 100).toBeGreaterThan(1000 * 80);
    expect(before * 100).toBeLessThan(1000 * 95);
    expect(seen.map(({ signal, ...rest }) => rest)).toEqual([
      { messages: [user('fill'), a1, r1], reason: 'ThresholdExceeded', tokensBefore: before, modelName: 'scripted' },
    ]);
    expect(seen[0]!.signal.aborted).toBe(false);
    expect(events.filter((e) => e.type === 'compaction.finished')).toEqual([
      // The compactor measures its messages; the driver adds the tool definitions, as in every estimate.
      { type: 'compaction.finished', reason: 'ThresholdExceeded', before, after: 300 + estimateToolTokens([echoTool.definition]), rewritten: true },
    ]);
    const compacted = [user('fill'), a1, echoResult('call_1_0', '[pruned]')];
    expect(model.seen[1]!.messages).toEqual(compacted);
    expect(output).toEqual({
      outcome: { type: 'Completed', finalText: 'done' },
      messages: [...compacted, { role: 'assistant', content: 'done' }],
      usage: { inputTokens: 1160, outputTokens: 15 },
    });
    expect(providerValid(output.messages)).toBe(true);
  });

  it('a compactor returning null under the threshold latches deferral: the run goes on, compacting once', async () => {
    const model = scriptedModel([
      { toolCalls: [{ name: 'echo', args: { text: 'x' } }], usage: { inputTokens: 840, outputTokens: 10 } },
      { toolCalls: [{ name: 'echo', args: { text: 'y' } }], usage: { inputTokens: 850, outputTokens: 10 } },
      { text: 'done', usage: { inputTokens: 870, outputTokens: 5 } },
    ]);
    const { compactor, seen } = recordingCompactor(() => null);
    const actor = createActor(createAgentMachine({ model, tools: [echoTool], compactor }), {
      input: { prompt: 'fill', policy: { contextWindow: 1000 } },
    });
    const events = collect(actor);
    const deferredAtTurnEnd: boolean[] = [];
    actor.on('turn.finished', () => deferredAtTurnEnd.push(actor.getSnapshot().context.brain.context.deferredCompaction));
    const output = await runToCompletion(actor);

    const before = afterResults(850);
    expect(seen.map((s) => [s.reason, s.tokensBefore])).toEqual([['ThresholdExceeded', before]]);
    expect(events.filter((e) => e.type === 'compaction.finished')).toEqual([
      { type: 'compaction.finished', reason: 'ThresholdExceeded', before, after: before, rewritten: false },
    ]);
    expect(deferredAtTurnEnd).toEqual([false, true, true]);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    expect(output.messages).toHaveLength(6);
    expect(output.messages.slice(0, 3)).toEqual([user('fill'), a1, r1]);
    expect(providerValid(output.messages)).toBe(true);
  });
});

describe('emergency compaction', () => {
  it('runs at the emergency line even with autoCompact off', async () => {
    const model = recording(
      scriptedModel([
        { toolCalls: [{ name: 'echo', args: { text: 'x' } }], usage: { inputTokens: 940, outputTokens: 10 } },
        { text: 'done', usage: { inputTokens: 200, outputTokens: 5 } },
      ]),
    );
    const { compactor, seen } = recordingCompactor(pruneTools(200));
    const actor = createActor(createAgentMachine({ model, tools: [echoTool], compactor }), {
      input: { prompt: 'fill', policy: { contextWindow: 1000, autoCompact: false } },
    });
    const events = collect(actor);
    const output = await runToCompletion(actor);

    const before = afterResults(950);
    expect(seen.map((s) => [s.reason, s.tokensBefore, s.messages])).toEqual([['Emergency', before, [user('fill'), a1, r1]]]);
    expect(events.filter((e) => e.type === 'compaction.finished')).toEqual([
      { type: 'compaction.finished', reason: 'Emergency', before, after: 200 + estimateToolTokens([echoTool.definition]), rewritten: true },
    ]);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    expect(output.messages).toEqual([user('fill'), a1, echoResult('call_1_0', '[pruned]'), { role: 'assistant', content: 'done' }]);
  });

  it('at run start: a session whose last run ended near the window compacts before the first model call', async () => {
    const answer: ScriptEntry = (request) => {
      const last = request.messages.at(-1)!;
      return last.content === 'first'
        ? { text: 're: first', usage: { inputTokens: 960, outputTokens: 10 } }
        : { text: `re: ${last.content}`, usage: { inputTokens: 60, outputTokens: 5 } };
    };
    const model = recording(scriptedModel([answer, answer]));
    const summary: Message = { role: 'system', content: 'summary: the user said first' };
    const { compactor, seen } = recordingCompactor(({ messages }) => ({ messages: [summary, messages.at(-1)!], tokensAfter: 50 }));
    const actor = createActor(createAgentMachine({ model, compactor }), { input: { policy: { contextWindow: 1000 } } });
    actor.start();
    const first = await runInSession(actor, 'first');
    expect(first.messages).toEqual([user('first'), { role: 'assistant', content: 're: first' }]);
    expect(seen).toHaveLength(0);

    const second = await runInSession(actor, 'second');
    expect(seen.map((s) => [s.reason, s.tokensBefore, s.messages])).toEqual([
      ['Emergency', 970 + estimateMessageTokens(user('second')), [user('first'), { role: 'assistant', content: 're: first' }, user('second')]],
    ]);
    expect(model.seen.at(-1)!.messages).toEqual([summary, user('second')]);
    expect(second.outcome).toEqual({ type: 'Completed', finalText: 're: second' });
    expect(second.messages).toEqual([summary, user('second'), { role: 'assistant', content: 're: second' }]);
  });
});

describe('compaction failures', () => {
  it('a compactor returning null at the emergency line stalls: Failed(CompactionStalled), run discarded', async () => {
    const model = scriptedModel([
      { toolCalls: [{ name: 'echo', args: { text: 'x' } }], usage: { inputTokens: 940, outputTokens: 10 } },
      { text: 'never' },
    ]);
    const { compactor } = recordingCompactor(() => null);
    const output = await runToCompletion(
      createActor(createAgentMachine({ model, tools: [echoTool], compactor }), {
        input: { prompt: 'fill', policy: { contextWindow: 1000 } },
      }),
    );
    const before = afterResults(950);
    expect(output.outcome).toEqual({
      type: 'Failed',
      error: { type: 'CompactionStalled', message: `compaction made no progress (${before} tokens before, ${before} after)` },
    });
    expect(output.messages).toEqual([]);
  });

  it('a compactor that throws fails the run with CompactionError', async () => {
    const model = scriptedModel([
      { text: 'older' }, // the history's assistant message takes the first entry
      { toolCalls: [{ name: 'echo', args: { text: 'x' } }], usage: { inputTokens: 840, outputTokens: 10 } },
      { text: 'never' },
    ]);
    const { compactor } = recordingCompactor(() => {
      throw new Error('summarizer down');
    });
    const output = await runToCompletion(
      createActor(createAgentMachine({ model, tools: [echoTool], compactor }), {
        input: { prompt: 'fill', history: [user('old'), { role: 'assistant', content: 'older' }], policy: { contextWindow: 1000 } },
      }),
    );
    expect(output.outcome).toEqual({ type: 'Failed', error: { type: 'CompactionError', message: 'summarizer down' } });
    expect(output.messages).toEqual([user('old'), { role: 'assistant', content: 'older' }]);
  });

  it("a compactor's own error marked changedNothing is a pass that changed nothing: the stall rule decides", async () => {
    const model = scriptedModel([
      { toolCalls: [{ name: 'echo', args: { text: 'x' } }], usage: { inputTokens: 940, outputTokens: 10 } },
      { text: 'never' },
    ]);
    const { compactor } = recordingCompactor(() => {
      throw Object.assign(new Error('my summarizer had nothing to say'), { changedNothing: true });
    });
    const output = await runToCompletion(
      createActor(createAgentMachine({ model, tools: [echoTool], compactor }), {
        input: { prompt: 'fill', policy: { contextWindow: 1000 } },
      }),
    );
    expect(output.outcome).toMatchObject({ type: 'Failed', error: { type: 'CompactionStalled' } });
  });

  it('cancel during compaction aborts the compactor and salvages the run', async () => {
    const model = scriptedModel([
      { toolCalls: [{ name: 'echo', args: { text: 'x' } }], usage: { inputTokens: 840, outputTokens: 10 } },
      { text: 'never' },
    ]);
    const { compactor, seen } = recordingCompactor(
      ({ signal }) => new Promise<CompactionResult>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true })),
    );
    const actor = createActor(createAgentMachine({ model, tools: [echoTool], compactor }), {
      input: { prompt: 'fill', policy: { contextWindow: 1000 } },
    });
    actor.start();
    await waitForRunning(actor, 'AwaitingCompaction');
    expect(actor.getSnapshot().context.brain.value).toBe('AwaitingCompaction');
    actor.send({ type: 'cancel' });
    const output = await runToCompletion(actor);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.signal.aborted).toBe(true);
    expect(output.outcome).toEqual({ type: 'Cancelled' });
    expect(output.messages).toEqual([user('fill'), a1, r1]);
  });
});

describe('the token estimate the compaction lines read', () => {
  it('without reported usage, is measured with the tokenizer at run start and after each reply', async () => {
    const a1x: AssistantMessage = { role: 'assistant', content: '', toolCalls: [{ id: 't1', name: 'echo', args: { text: 'x' } }] };
    const r1x: ToolMessage = echoResult('t1', 'x');
    const a2x: AssistantMessage = { role: 'assistant', content: 'done' };
    const atCall: number[] = [];
    let actorRef: AgentActor | undefined;
    let calls = 0;
    const model: Model = {
      name: 'bare',
      async generate() {
        atCall.push(actorRef!.getSnapshot().context.brain.context.contextTokens);
        return calls++ === 0 ? { message: a1x, finishReason: 'tool-calls' } : { message: a2x, finishReason: 'stop' };
      },
    };
    const actor = createActor(createAgentMachine({ model, tools: [echoTool] }), { input: { prompt: 'go' } });
    actorRef = actor;
    const atTurnEnd: number[] = [];
    actor.on('turn.finished', () => atTurnEnd.push(actor.getSnapshot().context.brain.context.contextTokens));
    const output = await runToCompletion(actor);

    const defs = [echoTool.definition];
    expect(atCall[0]).toBe(estimateTokens([user('go')], defs));
    expect(atTurnEnd).toEqual([estimateTokens([user('go'), a1x], defs), estimateTokens([user('go'), a1x, r1x, a2x], defs)]);
    // After the results the estimate grows by (at least) the results' size.
    expect(atCall[1]).toBeGreaterThanOrEqual(estimateTokens([user('go'), a1x, r1x], defs));
    expect(output.usage).toEqual({ inputTokens: 0, outputTokens: 0 });
  });

  it("counts operations' prompt parts before the model call (seed 000: refreshed before model calls carrying extras)", async () => {
    const order: string[] = [];
    const memory = 'memory '.repeat(900);
    expect(estimateTokens([{ role: 'system', content: memory }, user('go')]) * 100).toBeGreaterThan(1000 * 80);
    expect(estimateTokens([{ role: 'system', content: memory }, user('go')]) * 100).toBeLessThan(1000 * 95);
    const model: Model = {
      name: 'bare',
      async generate() {
        order.push('model');
        return { message: { role: 'assistant', content: 'ok' }, finishReason: 'stop' };
      },
    };
    const compactor: Compactor = async ({ reason }) => {
      order.push(`compact:${reason}`);
      return null;
    };
    const output = await runToCompletion(
      createActor(createAgentMachine({ model, compactor, operations: [{ name: 'memory', prompt: () => memory }] }), {
        input: { prompt: 'go', policy: { contextWindow: 1000 } },
      }),
    );
    // The next request is above the threshold: the trigger must see it before the call is made.
    expect(order).toEqual(['compact:ThresholdExceeded', 'model']);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'ok' });
  });
});

describe('the pruning pass', () => {
  it('runs a replaced pruner above the prune line, before any compaction, and the model sees its result', async () => {
    const model = recording(
      scriptedModel([
        { toolCalls: [{ name: 'echo', args: { text: 'x' } }], usage: { inputTokens: 600, outputTokens: 10 } },
        { toolCalls: [{ name: 'echo', args: { text: 'y' } }], usage: { inputTokens: 650, outputTokens: 10 } },
        { text: 'done', usage: { inputTokens: 100, outputTokens: 5 } },
      ]),
    );
    const calls: number[] = [];
    const compactor: Compactor = async () => {
      throw new Error('pruning should have been enough');
    };
    const actor = createActor(
      createAgentMachine({
        model,
        tools: [echoTool],
        compactor,
        pruning: { threshold: 50, protectTokens: 0 },
        // A pruner of our own: blanks every tool result but the last, and says it saved 300 tokens.
        pruner: (messages) => {
          calls.push(messages.length);
          const last = messages.findLastIndex((m) => m.role === 'tool');
          const pruned = messages.map((m, i) => (m.role === 'tool' && i !== last && m.content !== '-' ? { ...m, content: '-' } : m));
          const count = pruned.filter((m, i) => m !== messages[i]).length;
          return { messages: pruned, pruned: count, tokensSaved: count * 300 };
        },
      }),
      { input: { prompt: 'go', policy: { contextWindow: 1000 } } },
    );
    const events = collect(actor);
    const output = await runToCompletion(actor);

    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    // Asked above the 50% line only, and adopted once: the second time there was nothing to prune.
    expect(events.filter((e) => e.type === 'prune.finished').map((e) => (e as { pruned: number }).pruned)).toEqual([1]);
    expect(calls.length).toBeGreaterThanOrEqual(1);
    expect(model.seen[2]!.messages.filter((m) => m.role === 'tool').map((m) => m.content)).toEqual(['-', 'y']);
    expect(events.some((e) => e.type === 'compaction.finished')).toBe(false);
  });
});
