/**
 * A closed union of failure types (switch is exhaustive in TypeScript; an unknown stored type
 * reads as `Unknown` with its text), and facade feeds that are not lists are typed refusals.
 */
import { describe, expect, it } from 'vitest';
import { createActor, waitFor } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { FAILURE_TYPES, agentOutcome, type AgentOutcome, type FailureType } from '../../../src/agent/protocol/failure.js';
import { InvalidFeedError } from '../../../src/errors.js';
import { LoopMachine } from '../../../src/brain/loop-machine.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';
import { scriptedModel } from '../../../src/testing.js';

/** Compiles only while every failure type has its case (the `never` check). */
function explain(outcome: AgentOutcome): string {
  if (outcome.type !== 'Failed') return outcome.type;
  const type: FailureType = outcome.error.type;
  switch (type) {
    case 'ModelError':
    case 'ToolError':
    case 'CompactionError':
    case 'CompactionStalled':
    case 'OperationError':
    case 'ToolPolicyError':
    case 'StructuredOutputError':
    case 'GuardrailTripped':
    case 'GuardrailError':
    case 'InvalidInput':
    case 'TurnFailed':
    case 'Unknown':
      return type;
    default:
      return type satisfies never;
  }
}

describe('failure types', () => {
  it('are a closed set, and a run failure carries one of them', async () => {
    expect([...FAILURE_TYPES].sort()).toEqual([
      'CompactionError',
      'CompactionStalled',
      'GuardrailError',
      'GuardrailTripped',
      'InvalidInput',
      'ModelError',
      'OperationError',
      'StructuredOutputError',
      'ToolError',
      'ToolPolicyError',
      'TurnFailed',
      'Unknown',
    ]);
    const model = { name: 'down', generate: async () => { throw new Error('unreachable'); } };
    const actor = createActor(createAgentMachine({ model, retry: false }), { input: { sessionId: 's' } }).start();
    actor.send({ type: 'input', message: 'hi' });
    const idle = await waitFor(actor, (s) => s.matches('Idle') && s.context.runIndex === 1, { timeout: 5_000 });
    expect(explain(idle.context.lastRun!.outcome)).toBe('ModelError');
  });

  it('a type this build does not know reads as Unknown, keeping the stored type and text', async () => {
    expect(agentOutcome({ type: 'Failed', error: { type: 'QuotaError', message: 'out of quota' } })).toEqual({
      type: 'Failed',
      error: { type: 'Unknown', message: 'QuotaError: out of quota' },
    });
    // A stored session whose last run failed with such a type opens, and says Unknown.
    const store = new MemorySessionStore();
    const machine = createAgentMachine({ model: scriptedModel([{ text: 'ok' }]) });
    const first = await DurableSession.open({ store, sessionId: 'old', machine });
    first.actor.send({ type: 'input', message: 'hi' });
    await waitFor(first.actor, (s) => s.matches('Idle') && s.context.runIndex === 1, { timeout: 5_000 });
    await first.close();
    const stored = (await store.load('old'))!;
    const row = stored.state as { lastRun: { outcome: unknown } };
    row.lastRun.outcome = { type: 'Failed', error: { type: 'QuotaError', message: 'out of quota' } };
    await store.apply('old', { expectedVersion: stored.version, state: row } as never);
    const reopened = await DurableSession.open({ store, sessionId: 'old', machine });
    expect(reopened.actor.getSnapshot().context.lastRun?.outcome).toEqual({ type: 'Failed', error: { type: 'Unknown', message: 'QuotaError: out of quota' } });
    await reopened.close();
  });
});

describe('facade feeds that are not lists', () => {
  const awaitingTools = () => {
    const m = new LoopMachine();
    m.acceptInput({ role: 'user', content: 'go' });
    m.nextStep();
    m.modelResponse({ role: 'assistant', content: '', toolCalls: [{ id: 'a', name: 't', args: {} }] }, 10, ['t']);
    return m;
  };
  for (const [name, feed] of [
    ["toolResults('x')", (m: LoopMachine) => m.toolResults('x' as never)],
    ['toolResults(null)', (m: LoopMachine) => m.toolResults(null as never)],
    ['toolResults({})', (m: LoopMachine) => m.toolResults({} as never)],
  ] as const) {
    it(`${name} is an InvalidFeedError and changes nothing`, () => {
      const m = awaitingTools();
      const before = JSON.stringify(m.toJSON());
      expect(() => feed(m)).toThrow(InvalidFeedError);
      expect(JSON.stringify(m.toJSON())).toBe(before);
    });
  }

  it("compactionResult('x', 1, 1) and adoptPruned(7) are InvalidFeedErrors", () => {
    const m = new LoopMachine();
    m.acceptInput({ role: 'user', content: 'go' });
    m.setContextTokens(1_000_000);
    m.nextStep({ contextWindow: 1_000 });
    expect(() => m.compactionResult('x' as never, 1, 1)).toThrow(InvalidFeedError);
    const fresh = new LoopMachine();
    expect(() => fresh.adoptPruned(7 as never)).toThrow(InvalidFeedError);
  });
});
