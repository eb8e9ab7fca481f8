/**
 * A call answered "interrupted" (a seal or a cancel while it ran) keeps the transcript coherent,
 * but it is not a tool call made: the brain's `totalToolCalls` (what `budget.maxToolCalls`
 * counts) leaves it out. Before, a seal while two calls ran counted 2 with none finished.
 */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine, defineTool } from '../../../src/index.js';
import { scriptedModel } from '../../../src/testing.js';

const endless = defineTool({
  name: 'wait',
  description: 'Waits until stopped.',
  input: z.object({ n: z.number() }),
  execute: (_, { signal }) => new Promise((resolve) => signal.addEventListener('abort', () => resolve('stopped'), { once: true })),
});
const quick = defineTool({ name: 'quick', description: 'Returns at once.', input: z.object({}), execute: () => 'ok' });

/** Runs until every `wait` call has started and every other call finished, sends `stop`, and resolves with the brain's count and the results. */
async function stoppedWhileRunning(stop: { type: 'seal'; reason: string } | { type: 'cancel' }, calls: { name: string; args: object }[]) {
  const model = scriptedModel([{ toolCalls: calls }, { text: 'never' }]);
  const actor = createActor(createAgentMachine({ model, tools: [endless, quick] }), { input: { prompt: 'Go.' } });
  let waiting = calls.filter((call) => call.name === 'wait').length;
  let finishing = calls.length - waiting;
  const check = () => waiting === 0 && finishing === 0 && queueMicrotask(() => actor.send(stop));
  actor.on('tool.started', (event) => event.call.name === 'wait' && (waiting--, check()));
  actor.on('tool.finished', (event) => event.call.name !== 'wait' && (finishing--, check()));
  const done = new Promise<void>((resolve, reject) => actor.subscribe({ complete: () => resolve(), error: reject }));
  actor.start();
  const timer = setTimeout(() => actor.stop(), 5_000);
  await done;
  clearTimeout(timer);
  const { brain } = actor.getSnapshot().context;
  return { total: brain.context.totalToolCalls, outcome: actor.getSnapshot().output!.outcome, messages: actor.getSnapshot().output!.messages };
}

describe('interrupted calls are not tool calls made', () => {
  it('a seal while two calls run: both answered interrupted, totalToolCalls 0', async () => {
    const { total, outcome, messages } = await stoppedWhileRunning({ type: 'seal', reason: 'enough' }, [{ name: 'wait', args: { n: 1 } }, { name: 'wait', args: { n: 2 } }]);
    expect(outcome).toEqual({ type: 'Sealed', reason: 'enough' });
    expect(messages.filter((m) => m.role === 'tool')).toHaveLength(2);
    expect(total).toBe(0);
  });

  it('a cancel while one call runs and one has finished: only the finished one counts', async () => {
    const { total, outcome } = await stoppedWhileRunning({ type: 'cancel' }, [{ name: 'quick', args: {} }, { name: 'wait', args: { n: 1 } }]);
    expect(outcome.type).toBe('Cancelled');
    expect(total).toBe(1);
  });
});
