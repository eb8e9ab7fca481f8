/** The pure rules of agents inside agents: child session ids, routing through the tree, child results, usage counted once. */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { childResult, childSessionId, childUsageCounted, qualifiedCalls, routeAmong, routedEvent, SubagentError } from '../../../src/agent/subagents/subagents.js';
import { InvalidSessionIdError } from '../../../src/stores/errors.js';

describe('subagent rules', () => {
  it("a child's session id is its parent's, then the call's key within the parent; checked like any session id", () => {
    expect(childSessionId('support-42', 'support-42:run-1:turn-1:tools:call_7')).toBe('support-42/run-1:turn-1:call_7');
    expect(childSessionId('a/run-1:turn-1:c1', 'a/run-1:turn-1:c1:run-1:turn-2:tools:c2')).toBe('a/run-1:turn-1:c1/run-1:turn-2:c2');
    expect(() => childSessionId('p', 'p:run-1:turn-1:tools:\u0000')).toThrow(InvalidSessionIdError);
    expect(() => childSessionId('p'.repeat(250), `${'p'.repeat(250)}:run-1:turn-1:tools:c1`)).toThrow(/limit is 256/);
  });

  it('a qualified id routes to the child of the call of the batch it begins with, with the rest as the id the child knows', () => {
    const batch = ['c1', 'w1'];
    expect(routedEvent({ type: 'approve', toolCallId: 'c1/e1/w1' }, batch)).toEqual({ callId: 'c1', event: { type: 'approve', toolCallId: 'e1/w1' } });
    expect(routedEvent({ type: 'approve', toolCallId: 'w1' }, batch)).toBeNull();
    expect(routedEvent({ type: 'approve', toolCallId: '/w1' }, batch)).toBeNull();
    expect(routedEvent({ type: 'steer', target: 'c1' }, batch)).toEqual({ callId: 'c1', event: { type: 'steer' } });
    expect(routedEvent({ type: 'steer', target: 'c1/e1' }, batch)).toEqual({ callId: 'c1', event: { type: 'steer', target: 'e1' } });
    expect(routedEvent({ type: 'steer' }, batch)).toBeNull();
    // No call of the batch: read at the first separator (a call that runs no child, refused by the chart).
    expect(routedEvent({ type: 'steer', target: 'zz/q1' }, batch)).toEqual({ callId: 'zz', event: { type: 'steer', target: 'q1' } });
    expect(qualifiedCalls('c1', [{ id: 'w1', name: 'write', args: {} }])).toEqual([{ id: 'c1/w1', name: 'write', args: {} }]);
  });

  it("a model's call id may hold the separator: routed by the calls of the batch, and an id that reads as two of them is ambiguous", () => {
    expect(routeAmong('a/b/p1', ['a/b', 'c'])).toEqual({ callId: 'a/b', rest: 'p1' });
    expect(routeAmong('a/b/x/y', ['a/b'])).toEqual({ callId: 'a/b', rest: 'x/y' });
    expect(routeAmong('a/b', ['a/b', 'c'])).toBeNull();
    expect(routeAmong('a/b/p1', ['a', 'a/b'])).toEqual({ ambiguous: ['a', 'a/b'] });
    expect(routeAmong('a/b', ['a', 'a/b'])).toEqual({ ambiguous: ['a', 'a/b'] });
    expect(routeAmong('a/c/p1', ['a', 'a/b'])).toEqual({ callId: 'a', rest: 'c/p1' });
    expect(routeAmong('a/', ['a'])).toBeNull();
    expect(routedEvent({ type: 'steer', target: 'a/b' }, ['a/b'])).toEqual({ callId: 'a/b', event: { type: 'steer' } });
    expect(routedEvent({ type: 'steer', target: 'a/b/e1' }, ['a/b'])).toEqual({ callId: 'a/b', event: { type: 'steer', target: 'e1' } });
    expect(routedEvent({ type: 'steer', target: 'a/b' }, ['a', 'a/b'])).toEqual({ ambiguous: ['a', 'a/b'] });
  });

  it("a child's result: its final text, its structured output, checked against the tool's schema; anything else is a SubagentError", () => {
    expect(childResult('r', { type: 'Completed', finalText: 'hi' })).toBe('hi');
    expect(childResult('r', { type: 'Completed', finalText: '{"n":1}' }, z.object({ n: z.number() }))).toEqual({ n: 1 });
    expect(childResult('r', { type: 'Completed', finalText: 'x', output: { n: 2 } } as never, z.object({ n: z.number() }))).toEqual({ n: 2 });
    expect(() => childResult('r', { type: 'Completed', finalText: 'not json' }, z.object({}))).toThrow(/not JSON/);
    expect(() => childResult('r', { type: 'Completed', finalText: '{"n":"1"}' }, z.object({ n: z.number() }))).toThrow(/malformed result/);
    expect(() => childResult('r', { type: 'Cancelled' })).toThrow(SubagentError);
    expect(() => childResult('r', { type: 'Sealed', reason: 'budget' })).toThrow("subagent 'r' ended Sealed: budget");
    expect(() => childResult('r', undefined)).toThrow(/without an outcome/);
  });

  it("a child's usage joins its parent's run and session once per child session, each report adding what the child spent since the last", () => {
    const zero = { inputTokens: 0, outputTokens: 0 };
    const used = { inputTokens: 3, outputTokens: 4 };
    const once = childUsageCounted({ runUsage: zero, sessionUsage: used }, 'p/c1', used)!;
    expect(once).toEqual({ assign: { runUsage: used, sessionUsage: { inputTokens: 6, outputTokens: 8 }, childUsage: { 'p/c1': used } }, added: used, addedByModel: null });
    expect(childUsageCounted(once.assign, 'p/c1', used)).toBeNull();
    const more = childUsageCounted(once.assign, 'p/c1', { inputTokens: 5, outputTokens: 4 })!;
    expect(more).toEqual({ assign: { runUsage: { inputTokens: 5, outputTokens: 4 }, sessionUsage: { inputTokens: 8, outputTokens: 8 }, childUsage: { 'p/c1': { inputTokens: 5, outputTokens: 4 } } }, added: { inputTokens: 2, outputTokens: 0 }, addedByModel: null });
  });

  it("a child's report by model adds each model's new tokens at the child's cost; a child counted without models (an older build's record) adds unsplit", () => {
    const zero = { inputTokens: 0, outputTokens: 0 };
    const u = (n: number) => ({ inputTokens: n, outputTokens: n });
    const first = childUsageCounted({ runUsage: zero, sessionUsage: zero }, 'p/c1', u(2), [{ model: 'child', usage: u(2), costUsd: 40 }])!;
    expect(first.addedByModel).toEqual([{ model: 'child', usage: u(2), costUsd: 40 }]);
    expect(first.assign.childUsage).toEqual({ 'p/c1': { ...u(2), models: [{ model: 'child', usage: u(2), costUsd: 40 }] } });
    // Its grandchild spends next: only the new model's tokens are added, at the cost the child reported.
    const later = childUsageCounted(first.assign, 'p/c1', u(5), [{ model: 'child', usage: u(2), costUsd: 40 }, { model: 'grandchild', usage: u(3), costUsd: 300 }])!;
    expect(later.addedByModel).toEqual([{ model: 'grandchild', usage: u(3), costUsd: 300 }]);
    expect(later.added).toEqual(u(3));
    expect(childUsageCounted(later.assign, 'p/c1', u(5), [{ model: 'child', usage: u(2), costUsd: 40 }, { model: 'grandchild', usage: u(3), costUsd: 300 }])).toBeNull();
    // Counted by a build that kept no models: what is new is added, not split (the parent books it as its own).
    const legacy = childUsageCounted({ runUsage: u(2), sessionUsage: u(2), childUsage: { 'p/c1': u(2) } }, 'p/c1', u(3), [{ model: 'child', usage: u(3), costUsd: 60 }])!;
    expect(legacy).toMatchObject({ added: u(1), addedByModel: null, assign: { childUsage: { 'p/c1': u(3) } } });
  });
});
