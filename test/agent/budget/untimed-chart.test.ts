/**
 * An agent without a budget has no deadline to hold (issue 39: a feature that is not configured
 * is not on a minimal agent's turn). XState raises a timer whose delay is undefined at once, as
 * an event of its own, so such an agent runs the chart without its `budgetDeadline` timers; one
 * with a budget keeps them. The states are the same, so a snapshot moves between the two.
 */
import { describe, expect, it } from 'vitest';
import { createActor, toPromise, waitFor, type InspectionEvent } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { scriptedModel } from '../../../src/testing.js';
import { defineTool } from '../../../src/tools/define-tool.js';

const echo = defineTool({ name: 'echo', description: 'Echoes.', input: z.object({ text: z.string() }), execute: ({ text }) => text });
const replies = () => scriptedModel([{ toolCalls: [{ name: 'echo', args: { text: 'a' } }] }, { text: 'done' }]);

/** The deadline timers a run raised, by the microsteps XState took for them. */
async function deadlineEvents(budget: { maxDurationMs: number } | undefined): Promise<string[]> {
  const seen: string[] = [];
  const inspect = (event: InspectionEvent) => {
    if (event.type === '@xstate.microstep' && event.event.type.startsWith('xstate.after.budgetDeadline')) seen.push(event.event.type);
  };
  const machine = createAgentMachine({ model: replies(), tools: [echo], ...(budget && { budget }) });
  const output = await toPromise(createActor(machine, { input: { prompt: 'go' }, inspect }).start());
  expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
  return seen;
}

describe('the deadline timers', () => {
  it('an agent without a budget raises none: a model call or a tool batch takes no extra step', async () => {
    expect(await deadlineEvents(undefined)).toEqual([]);
  });

  it('an agent with a time budget arms one per side effect in flight (none fires within the budget)', async () => {
    const machine = createAgentMachine({ model: replies(), tools: [echo], budget: { maxDurationMs: 60_000 } });
    const armed = (machine.root.states.Running!.states.AwaitingModel!.after ?? []).map((t) => String(t.delay));
    expect(armed).toEqual(['budgetDeadline', 'budgetDeadline', 'budgetDeadline']);
    expect(await deadlineEvents({ maxDurationMs: 60_000 })).toEqual([]);
  });

  it('the two charts have the same states: a session persisted by one goes on in the other', async () => {
    const model = () => scriptedModel([{ toolCalls: [{ name: 'echo', args: { text: 'a' } }] }, { text: 'done' }, { text: 'again' }]);
    const timed = createAgentMachine({ model: model(), tools: [echo], budget: { maxDurationMs: 60_000 } });
    const untimed = createAgentMachine({ model: model(), tools: [echo] });
    expect(untimed.root.states.Running!.states.AwaitingModel!.after).toEqual([]);
    const first = createActor(timed).start();
    first.send({ type: 'input', message: 'go' });
    await waitFor(first, (s) => s.value === 'Idle' && s.context.runIndex === 1, { timeout: 5_000 });
    const persisted = JSON.parse(JSON.stringify(first.getPersistedSnapshot()));
    first.stop();
    const second = createActor(untimed, { snapshot: persisted }).start();
    second.send({ type: 'input', message: 'more' });
    await waitFor(second, (s) => s.value === 'Idle' && s.context.runIndex === 2, { timeout: 5_000 });
    expect(second.getSnapshot().context.lastRun?.outcome).toEqual({ type: 'Completed', finalText: 'again' });
    second.stop();
  });
});
