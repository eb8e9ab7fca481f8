// examples/readme/operations.ts
import { AgentStepper, createAgentMachine, defineTool, type Operation } from 'loopchart';
import { scriptedModel } from 'loopchart/testing';
import { createActor, waitFor } from 'xstate';
import { z } from 'zod';

const order: string[] = [];
// Before each model call: fetch (async, with a signal and a timeout), keep it in the slice, prompt with it.
const memory: Operation<{ notes: string[] }> = {
  name: 'memory',
  state: { schema: z.object({ notes: z.array(z.string()) }), initial: { notes: [] } },
  async beforeModelCall(ctx) {
    order.push(`beforeModelCall ${ctx.turn}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
    return { state: { notes: ['Deploys need a green CI run.'] } };
  },
  prompt: (ctx) => ctx.state.notes.join('\n') || undefined,
  afterReply: (reply, ctx) => void order.push(`afterReply ${ctx.turn}`),
};
// Before tools run: yield until the CI result arrives; the payload is checked against `resume.schema`.
const ciGate: Operation<{ ci: string }, { status: 'passed' | 'failed' }> = {
  name: 'ci-gate',
  state: { schema: z.object({ ci: z.string() }), initial: { ci: 'unknown' } },
  resume: { schema: z.object({ status: z.enum(['passed', 'failed']) }), apply: ({ status }) => ({ state: { ci: status } }) },
  beforeTools(calls, ctx) {
    order.push(`beforeTools ${ctx.turn}`);
    if (ctx.state.ci === 'unknown' && calls.some(({ call }) => call.name === 'deploy')) return { yield: { reason: 'ci-result' } };
  },
};

const deploy = defineTool({ name: 'deploy', description: 'Deploys.', input: z.object({}), execute: () => 'deployed' });
const model = () => scriptedModel([{ toolCalls: [{ name: 'deploy', args: {} }] }, { text: 'Deployed.' }]);
// List order is execution order at each point; the approval-like gate must precede any operation that runs tools.
const agent = createAgentMachine({ model: model(), tools: [deploy], operations: [ciGate, memory] });

const actor = createActor(agent, { input: { prompt: 'Ship it.' } }).start();
const waiting = await waitFor(actor, (s) => s.matches({ Running: 'AwaitingOperation' }));
console.log(waiting.context.operations.waiting?.operation, waiting.context.operations.waiting?.reason); // ci-gate ci-result
actor.send({ type: 'operation.resume', operation: 'ci-gate', payload: { status: 'sometimes' } }); // refused: event.rejected
actor.send({ type: 'operation.resume', operation: 'ci-gate', payload: { status: 'passed' } });
const done = await waitFor(actor, (s) => s.status === 'done');
console.log(done.output?.outcome.type, JSON.stringify(done.context.operations.slices)); // Completed {"memory":{"notes":["Deploys need a green CI run."]},"ci-gate":{"ci":"passed"}}
console.log(order.join(' → ')); // beforeModelCall 1 → afterReply 1 → beforeTools 1 → beforeModelCall 2 → afterReply 2

// The same run, driven by the caller: step performs, apply stores, a yield waits for the caller.
const stepper = new AgentStepper(createAgentMachine({ model: model(), tools: [deploy], operations: [ciGate, memory] }), { input: { prompt: 'Ship it.' } });
for (let result = await stepper.step(); result.status !== 'finished'; result = await stepper.step()) {
  stepper.apply(result.status === 'yielded' ? [{ type: 'operation.resume', operation: 'ci-gate', payload: { status: 'passed' } }] : result.effects);
}
console.log(stepper.status()); // finished
