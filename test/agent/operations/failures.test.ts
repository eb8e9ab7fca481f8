/**
 * Every hook failure is a run failure, never an actor death: a prompt part that throws or is no
 * string, a request rewrite that throws or returns garbage, each `Failed(OperationError)` naming
 * the operation and the point; the actor takes the next input, and a durable session keeps the
 * run's input in its trace.
 */
import { describe, expect, it } from 'vitest';
import { createActor, toPromise, waitFor } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { type AgentEmitted } from '../../../src/agent/protocol/actor-types.js';
import type { Operation } from '../../../src/agent/operations/operation.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';
import { scriptedModel } from '../../../src/testing.js';

const broken: Record<string, { op: Operation; hook: string }> = {
  'a prompt that throws': { op: { name: 'bad', prompt: () => { throw new Error('no prompt today'); } }, hook: 'prompt' },
  'a prompt that returns a number': { op: { name: 'bad', prompt: (() => 42) as never }, hook: 'prompt' },
  'a prompt that returns an object': { op: { name: 'bad', prompt: (() => ({ text: 'x' })) as never }, hook: 'prompt' },
  'a prepareRequest that throws': { op: { name: 'bad', prepareRequest: () => { throw new TypeError('cannot rewrite'); } }, hook: 'prepareRequest' },
  'a prepareRequest that returns garbage': { op: { name: 'bad', prepareRequest: (() => 'nope') as never }, hook: 'prepareRequest' },
  'a prepareRequest that drops the tools': { op: { name: 'bad', prepareRequest: ((request: { messages: unknown[] }) => ({ messages: request.messages })) as never }, hook: 'prepareRequest' },
};

describe('an operation that fails outside its hooks', () => {
  for (const [name, { op, hook }] of Object.entries(broken)) {
    it(`${name}: the run fails with OperationError naming it, the actor lives`, async () => {
      const failed: AgentEmitted[] = [];
      const actor = createActor(createAgentMachine({ model: scriptedModel([{ text: 'never used' }, { text: 'second run' }]), operations: [op] }), { input: { sessionId: 's' } });
      actor.on('operation.failed', (e) => failed.push(e));
      actor.start();
      actor.send({ type: 'input', message: 'Hi' });
      const idle = await waitFor(actor, (s) => s.matches('Idle') && s.context.runIndex === 1, { timeout: 5_000 });
      expect(actor.getSnapshot().status).toBe('active');
      expect(idle.context.lastRun?.outcome).toMatchObject({ type: 'Failed', error: { type: 'OperationError' } });
      const message = (idle.context.lastRun?.outcome as { error: { message: string } }).error.message;
      expect(message).toContain(`operation 'bad' ${hook}`);
      expect(failed).toHaveLength(1);
      expect(failed[0]).toMatchObject({ operation: 'bad', error: { hook } });
      actor.stop();
    });
  }

  it('in a durable session the input that started the failed run is stored, and the next run goes on', async () => {
    const store = new MemorySessionStore();
    let fail = true;
    const op: Operation = {
      name: 'flaky',
      prompt: () => {
        if (fail) throw new Error('boom');
        return 'all good';
      },
    };
    const session = await DurableSession.open({ store, sessionId: 'd', machine: createAgentMachine({ model: scriptedModel([{ text: 'Fine.' }]), operations: [op] }) });
    session.actor.send({ type: 'input', message: 'Please remember this.' });
    await waitFor(session.actor, (s) => s.matches('Idle') && s.context.runIndex === 1, { timeout: 5_000 });
    await session.flush();
    const trace = (await store.readTrace!('d')).map((record) => record.entry);
    expect(trace).toContainEqual(expect.objectContaining({ type: 'run', prompt: 'Please remember this.' }));
    expect(trace).toContainEqual(expect.objectContaining({ type: 'finished', outcome: expect.objectContaining({ type: 'Failed' }) }));
    fail = false;
    session.actor.send({ type: 'input', message: 'Again.' });
    const done = await waitFor(session.actor, (s) => s.matches('Idle') && s.context.runIndex === 2, { timeout: 5_000 });
    expect(done.context.lastRun?.outcome).toEqual({ type: 'Completed', finalText: 'Fine.' });
    await session.close();
  });

  it('single-run mode: the actor finishes with the failure as its output', async () => {
    const actor = createActor(createAgentMachine({ model: scriptedModel([{ text: 'x' }]), operations: [broken['a prompt that throws']!.op] }), { input: { prompt: 'Hi' } }).start();
    const output = await toPromise(actor);
    expect(output.outcome).toMatchObject({ type: 'Failed', error: { type: 'OperationError' } });
  });
});
