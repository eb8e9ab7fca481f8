/**
 * Every payload a Restate session handler refuses names the field that is wrong (issue 25 item
 * 8): the `events` and `cancel` bodies, which may be left out, used to be unions with null whose
 * refusal was reported at the root ("(root): Invalid input").
 */
import * as restate from '@restatedev/restate-sdk';
import { describe, expect, it } from 'vitest';
import { checkPayload, type HandlerName } from '../../src/restate/payloads.js';

function refusal(handler: HandlerName, payload: unknown): string {
  try {
    checkPayload(handler, payload);
  } catch (error) {
    expect(error).toBeInstanceOf(restate.TerminalError);
    expect((error as restate.TerminalError).code).toBe(400);
    return (error as Error).message;
  }
  throw new Error(`${handler} accepted ${JSON.stringify(payload)}`);
}

describe('a refused payload names the field', () => {
  it.each([
    ['events', { cursor: 'x' }, 'cursor'],
    ['events', { cursor: 1.5 }, 'cursor'],
    ['events', { cursor: -1 }, 'cursor'],
    ['events', { limit: 0 }, 'limit'],
    ['events', { limit: 1001 }, 'limit'],
    ['events', { limit: 'ten' }, 'limit'],
    ['events', { cursor: 0, surprise: 1 }, 'surprise'],
    ['cancel', { now: true }, 'now'],
    ['send', { message: 42 }, 'message'],
    ['send', { message: 'hi', extra: 1 }, 'extra'],
    ['approve', {}, 'toolCallId'],
    ['seal', { reason: 5 }, 'reason'],
    ['resumeOperation', { payload: {} }, 'operation'],
  ] as const)('%s %j: the message names %s, not the root', (handler, payload, field) => {
    const message = refusal(handler, payload);
    expect(message).toMatch(new RegExp(`^${handler}: invalid payload: .*\\b${field}\\b`));
    expect(message).not.toContain('(root)');
  });

  it('a body that is not an object at all is refused at the root, which is where the problem is', () => {
    expect(refusal('events', 'cursor=3')).toContain('(root)');
    expect(refusal('send', null)).toContain('(root)');
  });

  it('events and cancel may be called without a body', () => {
    for (const body of [undefined, null, {}]) {
      expect(checkPayload('events', body)).toEqual({});
      expect(checkPayload('cancel', body)).toEqual({});
    }
    expect(checkPayload('events', { cursor: 4, limit: 10 })).toEqual({ cursor: 4, limit: 10 });
  });

  it("cancel takes the in-process event's graceMs, checked as it is there", () => {
    expect(checkPayload('cancel', { graceMs: 500 })).toEqual({ graceMs: 500 });
    expect(refusal('cancel', { graceMs: -1 })).toContain('graceMs');
    expect(refusal('cancel', { graceMs: 600_000 })).toContain('graceMs');
  });
});

describe("a refused message says what is wrong with it (not the union's bare 'Invalid input')", () => {
  it.each([
    [{ message: 42 }, /message: expected string or object, received number$/],
    [{ message: ['hi'] }, /message: expected string or object, received array$/],
    [{ message: { role: 'assistant', content: 'x' } }, /message\.role: Invalid input: expected "user"$/],
    [{ message: { role: 'user', content: [{ type: 'text' }] } }, /message\.content: Invalid input: expected string, received array$/],
  ])('send %j', (payload, expected) => {
    const message = refusal('send', payload);
    expect(message).toMatch(expected);
    expect(message).not.toMatch(/Invalid input;|Invalid input$/);
  });

  it('steer the same', () => {
    expect(refusal('steer', { message: { role: 'user' } })).toMatch(/^steer: invalid payload: message\.content: /);
  });
});

describe("a child's target is taken by every handler whose in-process event takes one (steer, seal, raise, resumeOperation)", () => {
  it.each([
    ['steer', { message: 'also the river', target: 'c1/e1' }],
    ['seal', { reason: 'enough', target: 'c1' }],
    ['raise', { budget: { maxToolCalls: 5 }, target: 'c1' }],
    ['resumeOperation', { operation: 'budget', payload: {}, target: 'c1' }],
  ] as const)('%s %j passes it on', (handler, payload) => {
    expect(checkPayload(handler, payload)).toEqual(payload);
  });

  it.each([
    ['steer', ''],
    ['seal', 5],
    ['raise', 'c'.repeat(1_001)],
    ['resumeOperation', ['c1']],
  ] as const)('%s with target %j: refused, naming target', (handler, target) => {
    const bodies = { steer: { message: 'x' }, seal: { reason: 'x' }, raise: { budget: { maxToolCalls: 5 } }, resumeOperation: { operation: 'budget', payload: {} } };
    expect(refusal(handler, { ...bodies[handler], target })).toMatch(new RegExp(`^${handler}: invalid payload: target: `));
  });
});
