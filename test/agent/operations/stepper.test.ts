/** The caller-driven API (issue 15): step / apply / finalize against the actor, same script, same transcript. */
import { describe, expect, it } from 'vitest';
import { createActor, waitFor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { type AgentEvent } from '../../../src/agent/protocol/agent-event.js';
import { type AgentOutput } from '../../../src/agent/protocol/actor-types.js';
import type { AgentConfig } from '../../../src/agent/core/config.js';
import { AgentStepper, StepTimeoutError, type SteppedSession } from '../../../src/agent/hosts/stepper.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { ciGateOperation } from '../../../examples/operations/ci-gate.js';
import { memoryOperation, scriptedMemoryStore } from '../../../examples/operations/memory.js';
import { ticketOperation } from '../../../examples/operations/ticket.js';
import { addTool, echoTool, recording, WAIT_MS } from '../../support/driver.js';

const deployTool = defineTool({ name: 'deploy', description: 'Deploys.', input: z.object({ build: z.string() }), execute: ({ build }) => `deployed ${build}` });

/** A fresh config per run: scripted model, tools, and the three example operations. */
function config() {
  const model = recording(
    scriptedModel([
      { text: 'Adding.', toolCalls: [{ name: 'add', args: { a: 2, b: 3 } }, { name: 'echo', args: { text: 'hi' } }] },
      { toolCalls: [{ name: 'deploy', args: { build: 'b-5' } }] },
      { text: 'Deployed b-5; 2 + 3 = 5.' },
    ]),
  );
  const memory = scriptedMemoryStore(['The user deploys on Tuesdays.', 'Builds are numbered b-N.']);
  const agent: AgentConfig = {
    model,
    tools: [addTool, echoTool, deployTool],
    operations: [memoryOperation(memory), ciGateOperation(), ticketOperation('T-3')],
  };
  return { agent, model, memory };
}
const PROMPT = 'Add 2 and 3, then deploy the builds.';
const RESUME: AgentEvent = { type: 'operation.resume', operation: 'ci-gate', payload: { status: 'passed' } };

async function viaActor(): Promise<{ output: AgentOutput; slices: unknown; requests: unknown[] }> {
  const { agent, model } = config();
  const actor = createActor(createAgentMachine(agent), { input: { prompt: PROMPT, sessionId: 'p' } }).start();
  await waitFor(actor, (s) => s.matches({ Running: 'AwaitingOperation' }), { timeout: WAIT_MS });
  actor.send(RESUME);
  const done = await waitFor(actor, (s) => s.status === 'done', { timeout: WAIT_MS });
  return { output: done.output!, slices: done.context.operations.slices, requests: model.seen.map((r) => r.messages) };
}

type Ctx = { context: { brain: { context: { history: unknown[]; pending: unknown[] } }; operations: { slices: unknown }; lastRun: unknown } };

describe('step / apply / finalize', () => {
  it('a stepped run gives the same transcript, state slices and model requests as the actor', async () => {
    const reference = await viaActor();
    const { agent, model } = config();
    const stepper = new AgentStepper(createAgentMachine(agent), { input: { prompt: PROMPT, sessionId: 'p' } });
    const statuses: string[] = [];
    for (let i = 0; i < 50; i++) {
      const before = JSON.stringify(stepper.session);
      const { status, effects } = await stepper.step();
      // step performs, it does not change the session
      expect(JSON.stringify(stepper.session)).toBe(before);
      statuses.push(status);
      if (status === 'finished') break;
      // A session is plain JSON: it survives being stored between steps.
      const stored = JSON.parse(JSON.stringify(status === 'yielded' ? stepper.apply([RESUME]) : stepper.apply(effects))) as SteppedSession;
      new AgentStepper(createAgentMachine(agent), { session: stored });
    }
    expect(statuses.at(-1)).toBe('finished');
    expect(statuses.filter((s) => s === 'yielded')).toHaveLength(1);
    const final = stepper.session as unknown as Ctx & { output: AgentOutput };
    expect(final.output).toEqual(reference.output);
    expect(final.context.operations.slices).toEqual(reference.slices);
    expect(model.seen.map((r) => r.messages)).toEqual(reference.requests);
    expect(reference.output.outcome).toEqual({ type: 'Completed', finalText: 'Deployed b-5; 2 + 3 = 5.' });
  });

  it('a stepped session can be continued by a fresh stepper from its stored JSON, as a queue worker would', async () => {
    const reference = await viaActor();
    let session: SteppedSession | undefined;
    const { agent } = config();
    for (let i = 0; i < 50; i++) {
      const stepper = new AgentStepper(createAgentMachine(agent), session ? { session } : { input: { prompt: PROMPT, sessionId: 'p' } });
      const { status, effects } = await stepper.step();
      if (status === 'finished') break;
      session = JSON.parse(JSON.stringify(stepper.apply(status === 'yielded' ? [RESUME] : effects)));
    }
    expect((session as unknown as { output: AgentOutput }).output).toEqual(reference.output);
  });

  it('an invalid resume applied to a yielded session is refused: the session still waits', async () => {
    const { agent } = config();
    const stepper = new AgentStepper(createAgentMachine(agent), { input: { prompt: PROMPT, sessionId: 'p' } });
    for (let i = 0; i < 20 && stepper.status() !== 'yielded'; i++) stepper.apply((await stepper.step()).effects);
    expect(stepper.status()).toBe('yielded');
    stepper.apply([{ type: 'operation.resume', operation: 'ci-gate', payload: { status: 'maybe' } }]);
    expect(stepper.status()).toBe('yielded');
    expect(await stepper.step()).toEqual({ status: 'yielded', effects: [] });
  });

  it('finalize closes an interrupted run as cancel does: unanswered calls get interrupted results; same transcript as the actor', async () => {
    // Actor: cancelled with the two calls of turn 1 unanswered (its tools never finish).
    const hanging = () => {
      const { agent } = config();
      const never = defineTool({ name: 'add', description: 'never', input: z.object({ a: z.number(), b: z.number() }), execute: () => new Promise<string>(() => {}) });
      // echo hangs too: a result that exists when the cancel comes is kept (see test/agent/cancel/result-on-its-way.test.ts).
      const neverEcho = defineTool({ name: 'echo', description: 'never', input: z.object({ text: z.string() }), execute: () => new Promise<string>(() => {}) });
      return { ...agent, tools: [never, neverEcho, deployTool], operations: [] };
    };
    const actor = createActor(createAgentMachine(hanging()), { input: { prompt: PROMPT, sessionId: 'p' } }).start();
    await waitFor(actor, (s) => s.context.brain.value === 'AwaitingTools', { timeout: WAIT_MS });
    actor.send({ type: 'cancel' });
    const cancelled = await waitFor(actor, (s) => s.status === 'done', { timeout: WAIT_MS });

    // Stepper: the model step applied, then the caller leaves the run.
    const stepper = new AgentStepper(createAgentMachine(hanging()), { input: { prompt: PROMPT, sessionId: 'p' } });
    stepper.apply((await stepper.step()).effects);
    expect((stepper.session as unknown as Ctx).context.brain.context.pending).toHaveLength(2);
    const closed = stepper.finalize() as unknown as { output: AgentOutput };
    expect(stepper.status()).toBe('finished');
    expect(closed.output).toEqual(cancelled.output);
    expect(closed.output.outcome).toEqual({ type: 'Cancelled' });
    expect(closed.output.messages.filter((m) => m.role === 'tool').map((m) => (m as { isError?: boolean }).isError)).toEqual([true, true]);
  });

  it('a step whose side effects do not finish in time rejects with StepTimeoutError; the session is unchanged', async () => {
    const stuck = { name: 'stuck', generate: () => new Promise<never>(() => {}) };
    const stepper = new AgentStepper(createAgentMachine({ model: stuck, retry: false }), { input: { prompt: 'hi' } }, { timeoutMs: 50 });
    const before = JSON.stringify(stepper.session);
    await expect(stepper.step()).rejects.toBeInstanceOf(StepTimeoutError);
    expect(JSON.stringify(stepper.session)).toBe(before);
    expect(stepper.status()).toBe('continues');
  });
});
