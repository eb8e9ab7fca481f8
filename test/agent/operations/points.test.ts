/**
 * The hook points as the loop reaches them (operations/points.ts, the agent's `points`): prompt
 * parts measured for the next call, the point after a reply opened with it, every point closed
 * when a run stops. An agent without operations has none, so the loop runs none of their code.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { compileAgent } from '../../../src/agent/core/compile.js';
import { OperationError, type Operation } from '../../../src/agent/operations/operation.js';
import { planOperations } from '../../../src/agent/operations/operation-rules.js';
import { operationPoints } from '../../../src/agent/operations/points.js';
import { scriptedModel } from '../../../src/models/scripted.js';

const empty = { slices: {}, point: null, done: null, waiting: null };

describe('operationPoints', () => {
  it('gives the prompt parts in list order, each reading its own slice; a part that throws is its OperationError', () => {
    const operations: Operation[] = [
      { name: 'a', prompt: (ctx) => `turn ${ctx.turn}` },
      { name: 'b', state: { schema: z.number(), initial: 0 }, prompt: (ctx) => `b is ${String(ctx.state)}` },
    ];
    const points = operationPoints(operations, planOperations(operations));
    expect(points.promptParts({ sessionId: 's', turn: 2, messages: [] }, { b: 7 })).toEqual([
      { role: 'system', content: 'turn 2' },
      { role: 'system', content: 'b is 7' },
    ]);
    const failing: Operation[] = [{ name: 'bad', prompt: () => { throw new Error('no'); } }];
    expect(() => operationPoints(failing, planOperations(failing)).promptParts({ sessionId: 's', turn: 1, messages: [] }, {})).toThrow(OperationError);
  });

  it('opens the afterReply point with the reply only when an operation hooks it, and closes every point', () => {
    const hooked: Operation[] = [{ name: 'after', afterReply: () => undefined }];
    const points = operationPoints(hooked, planOperations(hooked));
    const open = points.afterReply(empty, 'k1', { message: { role: 'assistant', content: 'hi' } });
    expect(open.point).toMatchObject({ key: 'k1', hook: 'afterReply', next: 0 });
    expect(points.close(open)).toEqual(empty);
    const prompting: Operation[] = [{ name: 'p', prompt: () => 'x' }];
    expect(operationPoints(prompting, planOperations(prompting)).afterReply(empty, 'k1', {})).toBe(empty);
  });

  it('is what an agent with operations is compiled with; an agent without any has no points', () => {
    expect(compileAgent({ model: scriptedModel([]), operations: [{ name: 'p', prompt: () => 'x' }] }).points).not.toBeNull();
    expect(compileAgent({ model: scriptedModel([]) }).points).toBeNull();
  });
});
