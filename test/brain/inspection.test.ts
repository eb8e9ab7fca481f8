/** The brain under the XState inspector: state names visible, policy never stored. */
import { describe, expect, it } from 'vitest';
import { createActor, type InspectionEvent } from 'xstate';
import { loopMachine } from '../../machines/loop.machine.js';
import { LoopMachine } from '../../src/brain/loop-machine.js';
import { DEFAULT_POLICY, LoopContextSchema, type Policy } from '../../src/schemas.js';
import { asst, call, toolMsg, user } from '../support/brain.js';

const policy: Policy = { ...DEFAULT_POLICY, contextWindow: 1000 };

function recordRun() {
  const events: InspectionEvent[] = [];
  const actor = createActor(loopMachine, { input: {}, inspect: (e) => events.push(e) });
  actor.start();
  const send = (e: unknown) => actor.send(e as never);
  send({ type: 'acceptInput', message: user('what is in a.txt?') });
  send({ type: 'next', policy }); // CallLLM
  send({
    type: 'modelResponse',
    response: asst('reading', [call('c1', 'read', { path: 'a.txt' })]),
    contextTokens: 850,
    availableTools: ['read'],
  });
  send({ type: 'next', policy }); // CallTools
  send({ type: 'toolResults', messages: [toolMsg('c1', 'read', 'hello')] });
  send({ type: 'next', policy }); // Compact(ThresholdExceeded)
  send({ type: 'compactionResult', compacted: [user('summary')], before: 850, after: 100, contextWindow: 1000 });
  send({ type: 'next', policy }); // CallLLM
  send({ type: 'modelResponse', response: asst('it says hello'), contextTokens: 120, availableTools: ['read'] });
  send({ type: 'next', policy }); // Done
  return { actor, events };
}

describe('inspection', () => {
  it('snapshot events show Start, AwaitingModel, AwaitingTools, AwaitingCompaction, Terminal in run order', () => {
    const { actor, events } = recordRun();
    const values = events
      .filter((e) => e.type === '@xstate.snapshot' && e.actorRef === actor)
      .map((e) => (e as unknown as { snapshot: { value: unknown } }).snapshot.value);
    const distinct = values.filter((v, i) => i === 0 || v !== values[i - 1]);
    expect(distinct).toEqual([
      'Start',
      'AwaitingModel',
      'AwaitingTools',
      'Start',
      'AwaitingCompaction',
      'Start',
      'AwaitingModel',
      'Terminal',
    ]);
    expect(actor.getSnapshot().context.outcome).toEqual({ type: 'Completed', finalText: 'it says hello' });
    actor.stop();
  });

  it('the inspector sees the raw feed events by the method names', () => {
    const { actor, events } = recordRun();
    const types = events
      .filter((e) => e.type === '@xstate.event' && e.actorRef === actor)
      .map((e) => (e as unknown as { event: { type: string } }).event.type)
      .filter((t) => !t.startsWith('xstate.'));
    expect(types).toEqual([
      'acceptInput',
      'next',
      'modelResponse',
      'next',
      'toolResults',
      'next',
      'compactionResult',
      'next',
      'modelResponse',
      'next',
    ]);
    actor.stop();
  });

  it('the context holds exactly the brain’s fields, never the policy', () => {
    const { actor, events } = recordRun();
    const keys = Object.keys(LoopContextSchema.shape).sort();
    for (const e of events) {
      if (e.type !== '@xstate.snapshot' || e.actorRef !== actor) continue;
      const context = (e as unknown as { snapshot: { context: Record<string, unknown> } }).snapshot.context;
      expect(Object.keys(context).sort()).toEqual(keys);
    }
    actor.stop();
  });

  it('a facade’s actor is the inspectable machine with the same state names', () => {
    const m = new LoopMachine();
    m.acceptInput(user('x'));
    expect(m.actor.getSnapshot().value).toBe('Start');
    m.nextStep();
    expect(m.actor.getSnapshot().value).toBe('AwaitingModel');
    m.modelResponse(asst('', [call('c1')]), 1, ['read']);
    expect(m.actor.getSnapshot().value).toBe('AwaitingTools');
    m.toolResults([toolMsg('c1')]);
    m.setContextTokens(990);
    m.nextStep({ contextWindow: 1000 });
    expect(m.actor.getSnapshot().value).toBe('AwaitingCompaction');
    m.seal('stop');
    expect(m.actor.getSnapshot().value).toBe('Terminal');
  });
});
