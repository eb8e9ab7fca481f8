/** Custom yield points (issue 15): an operation yields, the actor waits visibly, a validated resume continues; list order rules. */
import { describe, expect, it } from 'vitest';
import { createActor, waitFor, type InspectionEvent } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { type AgentEmitted } from '../../../src/agent/protocol/actor-types.js';
import type { Operation, OperationStep } from '../../../src/agent/operations/operation.js';
import { InvalidConfigError } from '../../../src/errors.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { ciGateOperation } from '../../../examples/operations/ci-gate.js';
import { recording, WAIT_MS } from '../../support/driver.js';

const deployed: string[] = [];
const deployTool = defineTool({
  name: 'deploy',
  description: 'Deploys a build.',
  input: z.object({ build: z.string() }),
  execute: ({ build }) => (deployed.push(build), `deployed ${build}`),
});
const deployScript = () =>
  scriptedModel([{ toolCalls: [{ name: 'deploy', args: { build: 'b-7' } }] }, { text: 'Deployed b-7.' }]);

function gatedActor(operations: Operation[] = [ciGateOperation()]) {
  const model = recording(deployScript());
  const inspected: InspectionEvent[] = [];
  const actor = createActor(createAgentMachine({ model, tools: [deployTool], operations }), {
    input: { prompt: 'Ship b-7.', sessionId: 'ci' },
    inspect: (event) => inspected.push(event),
  });
  const emitted: AgentEmitted[] = [];
  for (const type of ['operation.yielded', 'event.rejected', 'tool.started'] as const) actor.on(type, (event) => emitted.push(event));
  return { actor, model, emitted, inspected };
}

describe('an operation that yields', () => {
  it('stops the run before the step it guards; the actor waits in AwaitingOperation, the inspector shows which operation', async () => {
    deployed.length = 0;
    const { actor, emitted, inspected } = gatedActor();
    actor.start();
    const waiting = await waitFor(actor, (s) => s.matches({ Running: 'AwaitingOperation' }), { timeout: WAIT_MS });
    expect(waiting.context.operations.waiting).toEqual({
      operation: 'ci-gate',
      reason: 'ci-result',
      payload: { calls: ['call_1_0'] },
      key: 'ci:run-1:turn-1:tools:before',
    });
    expect(emitted).toEqual([{ type: 'operation.yielded', operation: 'ci-gate', reason: 'ci-result', payload: { calls: ['call_1_0'] } }]);
    // What an inspector receives: the state and the operation it waits on.
    const last = inspected.filter((e) => e.type === '@xstate.snapshot' && e.actorRef === actor).at(-1) as unknown as {
      snapshot: { value: unknown; context: { operations: { waiting: { operation: string } } } };
    };
    expect(last.snapshot.value).toEqual({ Running: 'AwaitingOperation' });
    expect(last.snapshot.context.operations.waiting.operation).toBe('ci-gate');
    await new Promise((r) => setTimeout(r, 20));
    expect(deployed).toEqual([]);
    expect(actor.getSnapshot().matches({ Running: 'AwaitingOperation' })).toBe(true);

    actor.send({ type: 'operation.resume', operation: 'ci-gate', payload: { status: 'passed', url: 'https://ci.example/7' } });
    const done = await waitFor(actor, (s) => s.status === 'done', { timeout: WAIT_MS });
    expect(done.output!.outcome).toEqual({ type: 'Completed', finalText: 'Deployed b-7.' });
    expect(deployed).toEqual(['b-7']);
    expect(done.context.operations.slices).toEqual({ 'ci-gate': { results: [{ status: 'passed', url: 'https://ci.example/7' }] } });
  });

  it.each([
    ['a payload the schema refuses', { type: 'operation.resume', operation: 'ci-gate', payload: { status: 'green' } }, /payload for 'ci-gate'/],
    ['no payload at all', { type: 'operation.resume', operation: 'ci-gate' }, /payload/],
    ['another operation', { type: 'operation.resume', operation: 'memory', payload: { status: 'passed' } }, /operation 'memory' is not waiting \('ci-gate' is\)/],
    ['an empty operation name', { type: 'operation.resume', operation: '', payload: {} }, /operation/],
  ])('refuses %s with event.rejected; the actor lives and keeps waiting', async (_, event, reason) => {
    const { actor, emitted } = gatedActor();
    actor.start();
    await waitFor(actor, (s) => s.matches({ Running: 'AwaitingOperation' }), { timeout: WAIT_MS });
    actor.send(event as never);
    expect(actor.getSnapshot().status).toBe('active');
    expect(actor.getSnapshot().matches({ Running: 'AwaitingOperation' })).toBe(true);
    const rejected = emitted.filter((e) => e.type === 'event.rejected');
    expect(rejected).toHaveLength(1);
    expect((rejected[0] as { event: string }).event).toBe('operation.resume');
    expect((rejected[0] as { reason: string }).reason).toMatch(reason);
    // The right payload still resumes it.
    actor.send({ type: 'operation.resume', operation: 'ci-gate', payload: { status: 'failed' } });
    const done = await waitFor(actor, (s) => s.status === 'done', { timeout: WAIT_MS });
    expect(done.output!.outcome.type).toBe('Completed');
  });

  it('a resume when nothing waits is refused, not ignored', async () => {
    const actor = createActor(createAgentMachine({ model: deployScript(), tools: [deployTool] })).start();
    const rejected: AgentEmitted[] = [];
    actor.on('event.rejected', (e) => rejected.push(e));
    actor.send({ type: 'operation.resume', operation: 'ci-gate', payload: { status: 'passed' } });
    expect(rejected).toEqual([{ type: 'event.rejected', event: 'operation.resume', reason: 'not accepted now (the agent is "Idle")' }]);
  });

  it('a cancel while waiting ends the run Cancelled with the waiting calls interrupted', async () => {
    deployed.length = 0;
    const { actor } = gatedActor();
    actor.start();
    await waitFor(actor, (s) => s.matches({ Running: 'AwaitingOperation' }), { timeout: WAIT_MS });
    actor.send({ type: 'cancel' });
    const done = await waitFor(actor, (s) => s.status === 'done', { timeout: WAIT_MS });
    expect(done.output!.outcome).toEqual({ type: 'Cancelled' });
    expect(done.output!.messages.at(-1)).toMatchObject({ role: 'tool', toolCallId: 'call_1_0', isError: true });
    expect(deployed).toEqual([]);
    expect(done.context.operations.waiting).toBeNull();
  });
});

describe('list order at a point (seed 003)', () => {
  const marker = (name: string, log: string[], result?: (log: string[]) => OperationStep): Operation => ({
    name,
    resume: { schema: z.object({}) },
    async beforeTools() {
      log.push(name);
      return result?.(log);
    },
  });

  it('operations run in list order; the first that yields wins the point: later ones and the step wait until it is resumed', async () => {
    const log: string[] = [];
    const ops = [marker('first', log), marker('gate', log, () => ({ yield: { reason: 'hold' } })), marker('last', log)];
    const { actor } = gatedActor(ops);
    deployed.length = 0;
    actor.start();
    await waitFor(actor, (s) => s.matches({ Running: 'AwaitingOperation' }), { timeout: WAIT_MS });
    await new Promise((r) => setTimeout(r, 20));
    expect(log).toEqual(['first', 'gate']);
    expect(deployed).toEqual([]);
    actor.send({ type: 'operation.resume', operation: 'gate', payload: {} });
    await waitFor(actor, (s) => s.status === 'done', { timeout: WAIT_MS });
    // After the resume the point goes on after the operation that yielded: finished ones do not run twice.
    expect(log).toEqual(['first', 'gate', 'last']);
    expect(deployed).toEqual(['b-7']);
  });

  it('an operation that runs tools answers calls before they run; the calls it answered never run', async () => {
    deployed.length = 0;
    const dryRun: Operation = {
      name: 'dry-run',
      runsTools: true,
      beforeTools: (calls) => ({ results: calls.map(({ call }) => ({ role: 'tool' as const, toolCallId: call.id, toolName: call.name, content: 'dry run: not deployed' })) }),
    };
    const { actor } = gatedActor([dryRun]);
    actor.start();
    const done = await waitFor(actor, (s) => s.status === 'done', { timeout: WAIT_MS });
    expect(deployed).toEqual([]);
    expect(done.output!.messages[2]).toEqual({ role: 'tool', toolCallId: 'call_1_0', toolName: 'deploy', content: 'dry run: not deployed' });
  });

  it('an approval-like operation (yields before tools) after one that runs tools is a configuration error', () => {
    const runner: Operation = { name: 'runner', runsTools: true, beforeTools: () => undefined };
    expect(() => createAgentMachine({ model: deployScript(), operations: [runner, ciGateOperation()] })).toThrow(
      new InvalidConfigError(
        "operation 'ci-gate' may yield before tools run but comes after 'runner', which runs tools: list it first, or the calls it waits for would already have run (seed 003)",
      ),
    );
    // The same two the other way round are fine.
    expect(() => createAgentMachine({ model: deployScript(), operations: [ciGateOperation(), runner] })).not.toThrow();
  });

  it.each([
    ['a name used twice', [{ name: 'a' }, { name: 'a' }], /operation name 'a' is used twice/],
    ['an empty name', [{ name: '' }], /operation name "" must be/],
    ['__proto__ as a name', [{ name: '__proto__' }], /operation name "__proto__" must be/],
    ['a timeout of 0', [{ name: 'a', timeoutMs: 0 }], /timeoutMs must be positive/],
    ['an initial state its schema refuses', [{ name: 'a', state: { schema: z.number(), initial: 'x' } }], /initial state does not match its schema/],
  ])('%s is a configuration error', (_, operations, message) => {
    expect(() => createAgentMachine({ model: deployScript(), operations: operations as Operation[] })).toThrow(message);
  });

  it('an operation that yields without a resume schema, or gives results without runsTools, fails the run naming it', async () => {
    const noResume: Operation = { name: 'rude', beforeTools: () => ({ yield: { reason: 'x' } }) };
    const { actor } = gatedActor([noResume]);
    actor.start();
    const done = await waitFor(actor, (s) => s.status === 'done', { timeout: WAIT_MS });
    expect(done.output!.outcome).toEqual({ type: 'Failed', error: { type: 'OperationError', message: "operation 'rude' beforeTools: yielded, but declares no resume schema" } });
    const noRunner: Operation = { name: 'sneaky', beforeTools: (calls) => ({ results: [{ role: 'tool', toolCallId: calls[0]!.call.id, toolName: 'deploy', content: 'x' }] }) };
    const second = gatedActor([noRunner]).actor.start();
    const failed = await waitFor(second, (s) => s.status === 'done', { timeout: WAIT_MS });
    expect((failed.output!.outcome as { error: { message: string } }).error.message).toMatch(/^operation 'sneaky' beforeTools: returned tool results, but only a runsTools operation may/);
  });
});
