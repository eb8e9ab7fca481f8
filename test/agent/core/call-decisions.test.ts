/**
 * The record of people's decisions on the batch's calls that every batch reads
 * (src/agent/core/call-decisions.ts): which decision applies to a call, whether it waits, what a
 * denied call answers, and the calls in doubt. Ids and tool names are the model's strings, so
 * every lookup is an own-property one.
 */
import { describe, expect, it } from 'vitest';
import {
  ApprovalsSchema,
  decisionFor,
  deniedResult,
  DoubtStateSchema,
  isInDoubt,
  isWaiting,
  NO_APPROVALS,
  NO_DOUBT,
  rerunsOf,
  type Approvals,
} from '../../../src/agent/core/call-decisions.js';

const call = (id: string, name = 'send') => ({ id, name, args: {} });

describe('call decisions', () => {
  it('a call’s own decision comes before the standing one for its tool', () => {
    const approvals: Approvals = { waiting: ['a'], decisions: { a: { approved: false, reason: 'no' } }, standing: { send: 'approve' } };
    expect(decisionFor(approvals, call('a'))).toEqual({ approved: false, reason: 'no' });
    expect(decisionFor(approvals, call('b'))).toEqual({ approved: true, reason: 'standing decision for this session' });
    expect(decisionFor(approvals, call('c', 'other'))).toBeUndefined();
  });

  it('ids and tool names the model chose never find Object.prototype', () => {
    for (const id of ['toString', 'constructor', '__proto__', 'hasOwnProperty']) {
      expect(decisionFor(NO_APPROVALS, call(id, id))).toBeUndefined();
      expect(rerunsOf(NO_DOUBT, id)).toBe(0);
    }
  });

  it('a call waits while it is asked and undecided; a standing decision ends the wait', () => {
    const asked: Approvals = { ...NO_APPROVALS, waiting: ['a'] };
    expect(isWaiting(asked, call('a'))).toBe(true);
    expect(isWaiting(asked, call('b'))).toBe(false);
    expect(isWaiting({ ...asked, standing: { send: 'deny' } }, call('a'))).toBe(false);
    expect(isWaiting({ ...asked, decisions: { a: { approved: true } } }, call('a'))).toBe(false);
  });

  it('a denied call is answered with an error result naming the reason', () => {
    expect(deniedResult(call('a'), { approved: false, reason: 'too costly' })).toEqual({ role: 'tool', toolCallId: 'a', toolName: 'send', content: 'denied: too costly', isError: true });
    expect(deniedResult(call('a'), { approved: false }).content).toBe('denied: the user did not approve this tool call');
  });

  it('calls in doubt and their reruns', () => {
    const doubt = { waiting: ['a'], decisions: {}, reruns: { b: 2 } };
    expect(isInDoubt(doubt, 'a')).toBe(true);
    expect(isInDoubt(doubt, 'b')).toBe(false);
    expect(isInDoubt(undefined, 'a')).toBe(false);
    expect(rerunsOf(doubt, 'b')).toBe(2);
    expect(rerunsOf(undefined, 'b')).toBe(0);
  });

  it('a stored record keeps a `__proto__` key as data, drops a decision it cannot read and refuses a bad standing one', () => {
    const stored = JSON.parse('{"waiting":[],"decisions":{"__proto__":{"approved":true},"bad":{"approved":"yes"}},"standing":{}}');
    const approvals = ApprovalsSchema.parse(stored);
    expect(Object.hasOwn(approvals.decisions, '__proto__')).toBe(true);
    expect(Object.keys(approvals.decisions)).toEqual(['__proto__']);
    expect(ApprovalsSchema.safeParse({ ...NO_APPROVALS, standing: { send: 'maybe' } }).success).toBe(false);
    expect(DoubtStateSchema.safeParse({ waiting: [], decisions: {}, reruns: { a: -1 } }).success).toBe(false);
  });
});
