/** pruneToolResults: what it replaces, what it keeps, where the protected tail starts. */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { InvalidConfigError } from '../../src/errors.js';
import { prunedMarker, pruneToolResults } from '../../src/compaction/prune.js';
import { LoopMachine } from '../../src/brain/loop-machine.js';
import type { Message } from '../../src/schemas.js';
import { estimateMessageTokens, estimateTokens } from '../../src/tokens.js';
import { asst, call, providerValid, sys, toolMsg, user } from '../support/brain.js';

/** About `lines` × 30 tokens of log output. */
const logOutput = (tag: string, lines: number): string =>
  Array.from({ length: lines }, (_, i) => `2024-03-01T10:00:${String(i % 60).padStart(2, '0')}Z INFO ${tag} worker-${i % 7} batch ${i} ok`).join('\n');

/** sys, user, then three tool groups with large results, a parallel one in the middle, and a text reply. */
function conversation(): Message[] {
  return [
    sys('you read logs'),
    user('find the failing worker'),
    asst('reading a', [call('c1', 'read', { path: 'a.log' })]),
    toolMsg('c1', 'read', logOutput('a', 20)),
    asst('', [call('c2', 'read', { path: 'b.log' }), call('c3', 'grep', { pattern: 'ERR' })]),
    toolMsg('c2', 'read', logOutput('b', 20)),
    toolMsg('c3', 'grep', 'no match', true),
    asst('nothing yet, one more', [call('c4', 'read', { path: 'c.log' })]),
    toolMsg('c4', 'read', logOutput('c', 20)),
    asst('worker-3 failed'),
  ];
}

const shape = (m: Message) =>
  m.role === 'assistant'
    ? `assistant:${(m.toolCalls ?? []).map((c) => c.id).join(',')}`
    : m.role === 'tool'
      ? `tool:${m.toolCallId}:${m.toolName}:${m.isError ?? ''}`
      : m.role;

/** Tokens of messages[from..] (the tail a boundary at `from` protects). */
const tailTokens = (messages: readonly Message[], from: number) =>
  messages.slice(from).reduce((n, m) => n + estimateMessageTokens(m), 0);

describe('pruneToolResults', () => {
  it('keeps message count, roles, tool-call ids, tool names and error flags; replaces only old tool contents', () => {
    const messages = conversation();
    const { messages: out, pruned, tokensSaved } = pruneToolResults(messages, { protectTokens: 0 });
    expect(out).toHaveLength(messages.length);
    expect(out.map(shape)).toEqual(messages.map(shape));
    // Every non-tool message is the very same object; every tool result carries the marker.
    out.forEach((m, i) => {
      if (m.role !== 'tool') expect(m).toBe(messages[i]);
    });
    expect(out[3]).toEqual({ ...messages[3], content: prunedMarker(estimateMessageTokens(messages[3]!)) });
    expect(out[5]!.content).toMatch(/^\[pruned: old tool result of ~\d+ tokens\]$/);
    expect(out[8]!.content).toBe(prunedMarker(estimateMessageTokens(messages[8]!)));
    // 'no match' is shorter than any marker: replacing it would save nothing, so it stays.
    expect(out[6]).toBe(messages[6]);
    expect(pruned).toBe(3);
    expect(tokensSaved).toBe(estimateTokens(messages) - estimateTokens(out));
    expect(tokensSaved).toBeGreaterThan(1_000);
    expect(providerValid(out)).toBe(true);
  });

  it('protects the recent tail measured in tokens: the shortest suffix holding protectTokens', () => {
    const messages = conversation();
    // A tail of exactly the last three messages' tokens protects c4 (index 8) and nothing before it.
    const three = tailTokens(messages, 7);
    let result = pruneToolResults(messages, { protectTokens: three });
    expect(result.messages[8]).toBe(messages[8]);
    expect(result.messages[5]).not.toBe(messages[5]);
    expect(result.messages[3]).not.toBe(messages[3]);
    expect(result.pruned).toBe(2);

    // One token more reaches into message 6; c2's result (index 5) is still outside.
    result = pruneToolResults(messages, { protectTokens: three + 1 });
    expect(result.messages[5]).not.toBe(messages[5]);
    expect(result.pruned).toBe(2);

    // Reaching message 5 protects c2's result too; only c1's is pruned.
    result = pruneToolResults(messages, { protectTokens: tailTokens(messages, 6) + 1 });
    expect(result.messages[5]).toBe(messages[5]);
    expect(result.messages[3]).not.toBe(messages[3]);
    expect(result.pruned).toBe(1);

    // The whole conversation's worth protects everything.
    result = pruneToolResults(messages, { protectTokens: estimateTokens(messages) });
    expect(result.pruned).toBe(0);
    expect(result.messages).toBe(messages);
  });

  it('the tail is measured in tokens, not messages: one large recent result protects less history', () => {
    const small = logOutput('s', 2);
    const big = logOutput('big', 60);
    const messages: Message[] = [
      user('go'),
      asst('', [call('a', 'read')]),
      toolMsg('a', 'read', logOutput('a', 10)),
      asst('', [call('b', 'read')]),
      toolMsg('b', 'read', small),
      asst('', [call('c', 'read')]),
      toolMsg('c', 'read', big),
    ];
    // 1,000 tokens: the big result alone is more than that, so b's small result is not protected.
    expect(estimateMessageTokens(messages[6]!)).toBeGreaterThan(1_000);
    const { messages: out } = pruneToolResults(messages, { protectTokens: 1_000 });
    expect(out[6]).toBe(messages[6]);
    expect(out[4]!.content).toMatch(/^\[pruned/);
    expect(out[2]!.content).toMatch(/^\[pruned/);
  });

  it('never prunes results the model has not read yet, even when the newest one alone fills the tail', () => {
    // A parallel group has just come back: its last result is larger than protectTokens.
    const messages: Message[] = [
      user('go'),
      asst('', [call('old', 'read')]),
      toolMsg('old', 'read', logOutput('old', 20)),
      asst('', [call('p1', 'read'), call('p2', 'read')]),
      toolMsg('p1', 'read', logOutput('p1', 20)),
      toolMsg('p2', 'read', logOutput('p2', 100)),
    ];
    expect(estimateMessageTokens(messages[5]!)).toBeGreaterThan(2_000);
    const { messages: out, pruned } = pruneToolResults(messages, { protectTokens: 2_000 });
    expect(out[4]).toBe(messages[4]);
    expect(out[5]).toBe(messages[5]);
    expect(out[2]!.content).toMatch(/^\[pruned/);
    expect(pruned).toBe(1);
    // Once the model has answered, they are old like any other.
    const later = pruneToolResults([...messages, asst('read both')], { protectTokens: 0 });
    expect(later.pruned).toBe(3);
  });

  it('never prunes twice: a second pass over its own output changes nothing and returns the same array', () => {
    const first = pruneToolResults(conversation(), { protectTokens: 0 });
    const second = pruneToolResults(first.messages, { protectTokens: 0 });
    expect(second).toEqual({ messages: first.messages, pruned: 0, tokensSaved: 0 });
    expect(second.messages).toBe(first.messages);
    // Also when the tail moves: markers outside it stay as they were, byte for byte.
    const grown = [...first.messages, user('and now?'), asst('', [call('c5', 'read')]), toolMsg('c5', 'read', logOutput('d', 20)), asst('ok')];
    const third = pruneToolResults(grown, { protectTokens: 0 });
    expect(third.pruned).toBe(1);
    expect(third.messages.slice(0, first.messages.length)).toEqual(first.messages);
  });

  it('returns the same array, untouched, when there is nothing to prune', () => {
    const noTools = [sys(), user('hello'), asst('hi')];
    expect(pruneToolResults(noTools, { protectTokens: 0 })).toEqual({ messages: noTools, pruned: 0, tokensSaved: 0 });
    expect(pruneToolResults(noTools, { protectTokens: 0 }).messages).toBe(noTools);

    const tinyResults = [user('add'), asst('', [call('x', 'calc')]), toolMsg('x', 'calc', '42')];
    expect(pruneToolResults(tinyResults, { protectTokens: 0 }).messages).toBe(tinyResults);

    const messages = conversation();
    expect(pruneToolResults(messages, { protectTokens: 1e9 }).messages).toBe(messages);
    expect(pruneToolResults([], { protectTokens: 0 })).toEqual({ messages: [], pruned: 0, tokensSaved: 0 });
  });

  it('does not modify its input', () => {
    const messages = conversation();
    const copy = structuredClone(messages);
    Object.freeze(messages);
    messages.forEach((m) => Object.freeze(m));
    const { messages: out } = pruneToolResults(messages, { protectTokens: 0 });
    expect(out).not.toBe(messages);
    expect(messages).toEqual(copy);
  });

  it('its output is what the brain adopts with adoptPruned (same count, roles and ids, no state change)', () => {
    const messages = conversation();
    const history = messages.slice(0, 7);
    const brain = new LoopMachine({ history });
    brain.acceptInput(user('and c.log?'));
    expect(brain.nextStep()).toEqual({ type: 'CallLLM', turn: 1 });
    brain.modelResponse(asst('', [call('c4', 'read', { path: 'c.log' })]), 3_000, ['read']);
    brain.toolResults([toolMsg('c4', 'read', logOutput('c', 20))]);
    const before = brain.fullHistory();
    const { messages: pruned } = pruneToolResults(before, { protectTokens: 0 });
    brain.adoptPruned(pruned);
    expect(brain.state()).toEqual({ type: 'Start' });
    expect(brain.fullHistory()).toEqual(pruned);
    expect(brain.history()).toEqual(pruned.slice(0, history.length));
    expect(brain.nextStep()).toEqual({ type: 'CallLLM', turn: 2 });
  });
});

describe('the prune line in the agent configuration', () => {
  const model = { name: 'unused', generate: () => Promise.reject(new Error('not called')) };

  it('is refused at or above compactThreshold, accepted strictly below it', () => {
    expect(() => createAgentMachine({ model, pruning: { threshold: 80 }, policy: { compactThreshold: 80 } })).toThrow(InvalidConfigError);
    expect(() => createAgentMachine({ model, pruning: { threshold: 90 }, policy: { compactThreshold: 80 } })).toThrow(
      /prune line \(90%\) must be strictly below compactThreshold \(80%\)/,
    );
    expect(() => createAgentMachine({ model, pruning: { threshold: 79 }, policy: { compactThreshold: 80 } })).not.toThrow();
  });

  it('a policy change that would put the threshold at or below the prune line is rejected, the old policy kept', () => {
    const actor = createActor(createAgentMachine({ model, pruning: { threshold: 50 }, policy: { compactThreshold: 80 } }));
    const rejected: string[] = [];
    actor.on('policy.rejected', (e) => void rejected.push(e.reason));
    actor.start();
    actor.send({ type: 'policy', policy: { compactThreshold: 50 } });
    expect(rejected).toEqual([expect.stringMatching(/strictly below compactThreshold/)]);
    expect(actor.getSnapshot().context.policy.compactThreshold).toBe(80);
    actor.send({ type: 'policy', policy: { compactThreshold: 60 } });
    expect(actor.getSnapshot().context.policy.compactThreshold).toBe(60);
    actor.stop();
  });
});
