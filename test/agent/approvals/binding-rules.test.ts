/** The pure rules of decision binding (issue 26 item 1): digests, refusals, fail-closed restore. */
import { describe, expect, it } from 'vitest';
import { bindingRefusal, callDigest, canonicalJson, provenDecisions, type DecisionScope } from '../../../src/agent/approvals/approval-binding.js';
import type { ToolCall } from '../../../src/schemas.js';

const call = (id: string, args: unknown = { path: 'a' }): ToolCall => ({ id, name: 'write', args });
const scope = (over: Partial<DecisionScope> = {}): DecisionScope => ({
  run: 2,
  batch: [{ call: call('c1') }],
  finished: new Set(),
  decided: new Set(),
  history: [],
  waiting: null,
  ...over,
});

describe('callDigest', () => {
  it('is the same for the same name and arguments whatever the key order, and differs when either changes', () => {
    expect(canonicalJson({ b: 1, a: [{ d: 2, c: null }] })).toBe('{"a":[{"c":null,"d":2}],"b":1}');
    expect(callDigest({ name: 'w', args: { a: 1, b: 2 } })).toBe(callDigest({ name: 'w', args: { b: 2, a: 1 } }));
    expect(callDigest({ name: 'w', args: { a: 1 } })).not.toBe(callDigest({ name: 'w', args: { a: 2 } }));
    expect(callDigest({ name: 'w', args: { a: 1 } })).not.toBe(callDigest({ name: 'v', args: { a: 1 } }));
    expect(callDigest({ name: 'w', args: {} })).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('bindingRefusal', () => {
  const digest = callDigest(call('c1'));
  it('takes a decision naming the waiting call, its digest and its run', () => {
    expect(bindingRefusal(scope(), { toolCallId: 'c1', digest, run: 2 })).toBeNull();
  });
  it('refuses another run, an unknown call, a changed call, a decided one, a finished one, one not asked about', () => {
    const reason = (over: Partial<DecisionScope>, target: Parameters<typeof bindingRefusal>[1]) => bindingRefusal(scope(over), target)?.reason;
    expect(reason({}, { toolCallId: 'c1', digest, run: 1 })).toBe('other-run');
    expect(reason({}, { toolCallId: 'c9', digest, run: 2 })).toBe('unknown-call');
    expect(reason({ history: [{ role: 'tool', toolCallId: 'c9', toolName: 'write', content: 'ok' }] }, { toolCallId: 'c9' })).toBe('already-ran');
    expect(reason({}, { toolCallId: 'c1', digest: callDigest(call('c1', { path: 'b' })), run: 2 })).toBe('changed');
    expect(reason({ decided: new Set(['c1']) }, { toolCallId: 'c1', digest })).toBe('already-decided');
    expect(reason({ finished: new Set(['c1']) }, { toolCallId: 'c1', digest })).toBe('already-ran');
    expect(reason({ waiting: new Set() }, { toolCallId: 'c1', digest })).toBe('not-waiting');
  });
});

describe('provenDecisions', () => {
  it('keeps a decision only while it names its call digest: a missing or other digest is dropped', () => {
    const batch = [{ call: call('c1') }, { call: call('c2', { path: 'b' }) }];
    const decisions: Record<string, { approved: boolean; digest?: string }> = {
      c1: { approved: true, digest: callDigest(call('c1')) },
      c2: { approved: true, digest: callDigest(call('c2', { path: 'a' })) },
      c3: { approved: true },
    };
    expect(provenDecisions(decisions, batch)).toEqual({ c1: decisions['c1'] });
    const proven = { c1: decisions['c1']! };
    expect(provenDecisions(proven, batch)).toBe(proven);
  });
});
