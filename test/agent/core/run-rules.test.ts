/**
 * The driver's rules as pure functions (issue 9): each one over plain state, without an actor.
 */
import { describe, expect, it } from 'vitest';
import { NO_APPROVALS } from '../../../src/agent/core/call-decisions.js';
import { conversationOf, feedBrain, freshBrain, type BrainState } from '../../../src/agent/core/brain-state.js';
import { requestTokens } from '../../../src/agent/core/request-size.js';
import { reduceLoop } from '../../../machines/loop.machine.js';
import { feedProblem } from '../../../src/brain/feed-problems.js';
import type { LoopEvent } from '../../../src/brain/loop-events.js';
import {
  NO_USAGE,
  applyPrune,
  applyReply,
  applyToolResults,
  batchComplete,
  errorInfo,
  finishBrain,
  interruptBatch,
  journalResult,
  startRun,
  withExtras,
  type RunState,
} from '../../../src/agent/core/run-rules.js';
import { DEFAULT_POLICY, type ToolMessage } from '../../../src/schemas.js';
import { estimateMessageTokens, estimateTokens } from '../../../src/tokens.js';
import { INTERRUPTED_CONTENT } from '../../../src/tools/run-tools.js';

const tools = { definitions: [], names: ['echo'] };
const result = (id: string, content = 'ok'): ToolMessage => ({ role: 'tool', toolCallId: id, toolName: 'echo', content });

/** A run awaiting the tools of one reply with `ids` (unknown tools for ids starting with `u`). */
function awaitingTools(ids: string[]): RunState {
  let brain: BrainState = startRun(freshBrain(), { role: 'user', content: 'go' }, []);
  brain = feedBrain(brain, { type: 'next', policy: DEFAULT_POLICY });
  const state = { brain, toolJournal: [], approvals: NO_APPROVALS, runUsage: NO_USAGE, sessionUsage: NO_USAGE, extrasTokens: 0 };
  const reply = { message: { role: 'assistant' as const, content: '', toolCalls: ids.map((id) => ({ id, name: id.startsWith('u') ? 'unknown' : 'echo', args: {} })) }, finishReason: 'tool-calls' as const };
  return { ...state, ...applyReply(state, reply, tools) };
}

describe('applyReply', () => {
  it("takes the provider's count as the context size and adds usage to the run and the session", () => {
    const state = awaitingTools([]);
    const next = applyReply({ ...awaitingTools([]), brain: feedBrain(startRun(freshBrain(), { role: 'user', content: 'x' }, []), { type: 'next', policy: DEFAULT_POLICY }) }, { message: { role: 'assistant', content: 'hi' }, finishReason: 'stop', usage: { inputTokens: 40, outputTokens: 2 } }, tools);
    expect(next.brain.context.contextTokens).toBe(42);
    expect(next.runUsage).toEqual({ inputTokens: 40, outputTokens: 2 });
    expect(state.runUsage).toEqual(NO_USAGE);
  });

  it('without usage, estimates the whole request', () => {
    const start = feedBrain(startRun(freshBrain(), { role: 'user', content: 'x' }, []), { type: 'next', policy: DEFAULT_POLICY });
    const reply = { message: { role: 'assistant' as const, content: 'an answer' }, finishReason: 'stop' as const };
    const next = applyReply({ brain: start, toolJournal: [], approvals: NO_APPROVALS, runUsage: NO_USAGE, sessionUsage: NO_USAGE, extrasTokens: 0 }, reply, tools);
    expect(next.brain.context.contextTokens).toBe(estimateTokens([{ role: 'user', content: 'x' }, reply.message]));
  });

  it('a reply the brain refuses fails the run with ModelError instead of throwing', () => {
    const start = feedBrain(startRun(freshBrain(), { role: 'user', content: 'x' }, []), { type: 'next', policy: DEFAULT_POLICY });
    const calls = [{ id: 'same', name: 'echo', args: {} }, { id: 'same', name: 'echo', args: {} }];
    const next = applyReply({ brain: start, toolJournal: [], approvals: NO_APPROVALS, runUsage: NO_USAGE, sessionUsage: NO_USAGE, extrasTokens: 0 }, { message: { role: 'assistant', content: '', toolCalls: calls }, finishReason: 'tool-calls' }, tools);
    expect(next.brain.context.outcome).toMatchObject({ type: 'Failed', error: { type: 'ModelError' } });
  });
});

describe('the measure of a growing run', () => {
  const definitions = [{ name: 'echo', description: 'Echoes.', inputSchema: { type: 'object' } }];
  const echoTools = { definitions, names: ['echo'] };
  const turn = (n: number) => ({ message: { role: 'assistant' as const, content: `step ${n}`, toolCalls: [{ id: `c${n}`, name: 'echo', args: { n } }] }, finishReason: 'tool-calls' as const });

  it('stays the measure of the whole request, turn after turn, through steering and a pruned conversation', () => {
    let state: RunState = { brain: startRun(freshBrain([{ role: 'user', content: 'earlier' }, { role: 'assistant', content: 'before' }]), { role: 'user', content: 'go' }, definitions, 5), toolJournal: [], approvals: NO_APPROVALS, runUsage: NO_USAGE, sessionUsage: NO_USAGE, extrasTokens: 5 };
    for (let n = 1; n <= 30; n++) {
      let brain = feedBrain(state.brain, { type: 'next', policy: DEFAULT_POLICY });
      if (n % 7 === 0) brain = feedBrain(brain, { type: 'steer', message: { role: 'user', content: `steer ${n}` } });
      state = { ...state, ...applyReply({ ...state, brain }, turn(n), echoTools) };
      const sent = conversationOf(state.brain);
      expect(state.brain.context.contextTokens).toBe(requestTokens({ system: 5, messages: sent, tools: definitions }));
      state = { ...state, brain: applyToolResults({ ...state, toolJournal: [result(`c${n}`, 'x'.repeat(n))] }, 10) };
      if (n === 20) state = { ...state, brain: applyPrune(state.brain, { messages: sent.map((m) => (m.role === 'tool' ? { ...m, content: 'pruned' } : m)).concat(state.brain.context.pending.at(-1)!), tokensSaved: 0 }) };
    }
  });
});

describe('feeding the brain', () => {
  it('validates a feed once: the reducer takes the check feedBrain made', () => {
    const brain = feedBrain(startRun(freshBrain(), { role: 'user', content: 'go' }, []), { type: 'next', policy: DEFAULT_POLICY });
    let count = 0;
    // The validation reads availableTools; the reducer reads it too, to pre-answer unknown tools.
    const event = Object.defineProperty(
      { type: 'modelResponse' as const, response: { role: 'assistant' as const, content: '', toolCalls: [{ id: 'c1', name: 'echo', args: {} }] }, contextTokens: 1 },
      'availableTools',
      { enumerable: true, get: () => (count++, ['echo']) },
    ) as LoopEvent;
    const reads = (feed: () => unknown) => ((count = 0), feed(), count);
    const validation = reads(() => feedProblem(brain.context, event));
    const reducer = reads(() => reduceLoop(brain.value, brain.context, event, true));
    expect(validation).toBeGreaterThan(0);
    expect(reads(() => reduceLoop(brain.value, brain.context, event))).toBe(validation + reducer);
    expect(reads(() => feedBrain(brain, event))).toBe(validation + reducer);
    expect(feedBrain(brain, event).value).toBe('AwaitingTools');
  });
});

describe('a tool batch', () => {
  it('is complete when every call has a result: journaled, answered up front, or over the limit', () => {
    const state = awaitingTools(['a', 'u1', 'b']);
    expect(batchComplete(state, 10)).toBe(false);
    expect(batchComplete({ ...state, toolJournal: [result('a')] }, 10)).toBe(false);
    expect(batchComplete({ ...state, toolJournal: [result('a'), result('b')] }, 10)).toBe(true);
    // With a limit of 1 only `a` runs: `u1` is answered by the brain, `b` is over the limit.
    expect(batchComplete({ ...state, toolJournal: [result('a')] }, 1)).toBe(true);
  });

  it('a standing denial answers a call without running it', () => {
    const state = awaitingTools(['a']);
    expect(batchComplete({ ...state, approvals: { ...NO_APPROVALS, standing: { echo: 'deny' } } }, 10)).toBe(true);
  });

  it('feeds results in call order whatever order they arrived in, and grows the estimate by what came back', () => {
    const state = awaitingTools(['a', 'b']);
    const brain = applyToolResults({ ...state, toolJournal: [result('b', 'B'), result('a', 'A')] }, 10);
    expect(brain.context.pending.slice(-2)).toEqual([result('a', 'A'), result('b', 'B')]);
    // Each result is one more message of the request already measured: no second reply priming.
    expect(brain.context.contextTokens).toBe(state.brain.context.contextTokens + estimateMessageTokens(result('a', 'A')) + estimateMessageTokens(result('b', 'B')));
  });

  it('interrupted mid-batch: finished calls keep their results, the rest are interrupted', () => {
    const brain = interruptBatch({ ...awaitingTools(['a', 'b']), toolJournal: [result('a')], startedCalls: ['a', 'b'] }, 10, { type: 'cancelled' });
    expect(brain.context.pending.slice(-2)).toEqual([result('a'), { ...result('b', INTERRUPTED_CONTENT), isError: true }]);
  });

  it('interrupted mid-batch: a call that never started says so, and why the run stopped', () => {
    const brain = interruptBatch({ ...awaitingTools(['a', 'b']), startedCalls: ['a'] }, 10, { type: 'stopped', reason: 'budget: 2 tool calls made, limit 1' });
    expect(brain.context.pending.slice(-2).map((m) => m.content)).toEqual([
      'interrupted: the run was stopped (budget: 2 tool calls made, limit 1) before this tool call finished',
      'interrupted: the run was stopped (budget: 2 tool calls made, limit 1) before this tool call started; it did not run',
    ]);
  });

  it('journals a result once', () => {
    const once = journalResult([], result('a'));
    expect(journalResult(once, result('a', 'again'))).toBe(once);
  });
});

describe('finishing a run', () => {
  it('Completed commits, Failed discards, the rest salvage', () => {
    const failed = feedBrain(awaitingTools(['a']).brain, { type: 'fail', error: { type: 'X', message: 'm' } });
    expect(finishBrain(failed).context.history).toEqual([]);
    const sealed = feedBrain(awaitingTools(['a']).brain, { type: 'seal', reason: 'enough' });
    expect(finishBrain(sealed).context.history).toEqual([{ role: 'user', content: 'go' }]);
  });
});

describe('errorInfo', () => {
  it('reads any thrown value, a message getter that throws included', () => {
    const hostile = Object.defineProperty(new Error('x'), 'message', { get: () => { throw new Error('gotcha'); } });
    expect(errorInfo('ToolError', hostile)).toEqual({ type: 'ToolError', message: 'an error whose message could not be read' });
    expect(errorInfo('ToolError', null)).toEqual({ type: 'ToolError', message: 'null' });
  });
});

describe('estimate updates', () => {
  it('withExtras swaps the old extras for the new ones, never below zero', () => {
    const brain = feedBrain(freshBrain(), { type: 'setContextTokens', tokens: 100 });
    expect(withExtras(brain, 30, 50).context.contextTokens).toBe(120);
    expect(withExtras(brain, 300, 0).context.contextTokens).toBe(0);
  });

  it('applyPrune adopts the pruned conversation and subtracts what it saved', () => {
    const brain = feedBrain(startRun(freshBrain(), { role: 'user', content: 'go' }, []), { type: 'setContextTokens', tokens: 500 });
    const pruned = applyPrune(brain, { messages: [{ role: 'user', content: 'go' }], tokensSaved: 120 });
    expect(pruned.context.contextTokens).toBe(380);
    expect(pruned.context.pending).toEqual([{ role: 'user', content: 'go' }]);
  });
});
