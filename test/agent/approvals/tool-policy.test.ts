/**
 * Tool policy (issue 21): a function that sees the call, its arguments and the whole run decides
 * allow, deny (the reason is the call's result, which the model reads) or needs-approval (the
 * approval path), before any approval rule and before anything runs. Its decisions are recorded
 * in the driver's context, so a restored batch does not ask again; a policy that throws, returns
 * garbage or never returns fails the run with ToolPolicyError, the actor alive and nothing run.
 */
import { describe, expect, it } from 'vitest';
import { createActor, waitFor } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { ToolPolicy, ToolPolicyRequest } from '../../../src/agent/approvals/tool-policy.js';
import { InvalidConfigError } from '../../../src/errors.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';
import { runToCompletion } from '../../support/driver.js';
import { ask, awaitingApproval, collect, freeTool, guardedTool, providerValid, recordingModel, resultsById } from '../../support/hitl.js';

function run(policy: ToolPolicy | ToolPolicy[], replies: Parameters<typeof scriptedModel>[0], options: { toolPolicyTimeoutMs?: number } = {}) {
  const model = recordingModel(scriptedModel([...replies, { text: 'done' }]));
  const { tool: lookup, log } = freeTool('lookup');
  const { tool: write, ran } = guardedTool('write_file', false);
  const machine = createAgentMachine({ model: model.model, tools: [lookup, write], retry: false, toolPolicy: policy, ...options });
  const actor = createActor(machine, { input: { prompt: 'go', sessionId: 's' } });
  const finished = collect(actor, 'tool.finished');
  return { actor, model, log, ran, finished };
}

describe('tool policy', () => {
  it('a denial is the call result the model reads, and the tool never runs; an allowed call beside it runs', async () => {
    const policy: ToolPolicy = ({ call }) => (call.name === 'write_file' ? { type: 'deny', reason: 'writes are off today' } : { type: 'allow' });
    const { actor, model, ran, log, finished } = run(policy, [{ toolCalls: [ask('write_file', { path: 'a', content: 'x' }), ask('lookup', { key: 'k' })] }]);
    const output = await runToCompletion(actor);
    expect(output.outcome.type).toBe('Completed');
    expect(ran).toEqual([]);
    expect(log.finished).toHaveLength(1);
    const results = resultsById(model.requests[1]!);
    expect(results.get('call_1_0')).toMatchObject({ content: 'denied: writes are off today', isError: true });
    expect(results.get('call_1_1')?.content).toBe('value of k');
    expect(finished.map((event) => event.call.id).sort()).toEqual(['call_1_0', 'call_1_1']);
    expect(model.invalid()).toEqual([]);
  });

  it('needs-approval goes down the approval path: the call waits for a decision, then runs once approved', async () => {
    const policy: ToolPolicy = ({ call }) => (call.name === 'write_file' ? { type: 'needs-approval' } : { type: 'allow' });
    const { actor, model, ran } = run(policy, [{ toolCalls: [ask('write_file', { path: 'a', content: 'x' })] }]);
    const asked = collect(actor, 'approval.requested');
    actor.start();
    expect(await awaitingApproval(actor)).toEqual(['call_1_0']);
    expect(ran).toEqual([]);
    expect(asked.map((event) => event.calls.map((call) => call.id))).toEqual([['call_1_0']]);
    actor.send({ type: 'approve', toolCallId: 'call_1_0' });
    const done = await waitFor(actor, (s) => s.status === 'done', { timeout: 5_000 });
    expect(done.output!.outcome.type).toBe('Completed');
    expect(ran.map((entry) => entry.id)).toEqual(['call_1_0']);
    expect(resultsById(model.requests[1]!).get('call_1_0')?.content).toBe('wrote a');
  });

  it('sees the whole run: earlier calls with their results, the earlier calls of its own batch, and the conversation', async () => {
    const seen: { call: string; earlier: [string, string | undefined][]; messages: number }[] = [];
    const policy: ToolPolicy = (request: ToolPolicyRequest) => {
      seen.push({ call: request.call.id, earlier: request.earlierCalls.map(({ call, result }) => [call.id, result?.content]), messages: request.messages.length });
      // Writes only after a successful lookup.
      const looked = request.earlierCalls.some(({ call, result }) => call.name === 'lookup' && result?.content === 'value of k');
      return request.call.name === 'write_file' && !looked ? { type: 'deny', reason: 'look it up first' } : { type: 'allow' };
    };
    const { actor, model, ran } = run(policy, [
      { toolCalls: [ask('write_file', { path: 'a', content: 'x' }), ask('lookup', { key: 'k' })] },
      { toolCalls: [ask('write_file', { path: 'b', content: 'y' })] },
    ]);
    await runToCompletion(actor);
    expect(seen).toEqual([
      { call: 'call_1_0', earlier: [], messages: 2 },
      { call: 'call_1_1', earlier: [['call_1_0', undefined]], messages: 2 },
      {
        call: 'call_2_0',
        earlier: [
          ['call_1_0', 'denied: look it up first'],
          ['call_1_1', 'value of k'],
        ],
        messages: 5,
      },
    ]);
    expect(ran.map((entry) => entry.path)).toEqual(['b']);
    expect(model.invalid()).toEqual([]);
  });

  it('a list combines: the first deny wins over an earlier needs-approval, later policies are not asked', async () => {
    const asked: string[] = [];
    const ask1: ToolPolicy = () => (asked.push('ask'), { type: 'needs-approval' });
    const deny: ToolPolicy = () => (asked.push('deny'), { type: 'deny', reason: 'no' });
    const never: ToolPolicy = () => (asked.push('never'), { type: 'allow' });
    const { actor } = run([ask1, deny, never], [{ toolCalls: [ask('lookup', { key: 'k' })] }]);
    const output = await runToCompletion(actor);
    expect(output.outcome.type).toBe('Completed');
    expect(asked).toEqual(['ask', 'deny']);
  });

  it('a decision is recorded: a durable session reopened mid-batch does not ask the policy again', async () => {
    const asked: string[] = [];
    const policy: ToolPolicy = ({ call }) => (asked.push(call.id), { type: 'allow' });
    const model = scriptedModel([{ toolCalls: [ask('lookup', { key: 'k' })] }, { text: 'done' }]);
    const store = new MemorySessionStore();
    const held = freeTool('lookup', { held: true });
    const first = await DurableSession.open({ store, sessionId: 's', machine: createAgentMachine({ model, tools: [held.tool], retry: false, toolPolicy: policy }) });
    first.send({ type: 'input', message: 'go' });
    // Allowed and running: the verdict is stored before the call starts. The process "dies" here.
    await held.started;
    await first.flush();
    first.actor.stop();
    expect(asked).toEqual(['call_1_0']);
    const free = freeTool('lookup');
    const second = await DurableSession.open({ store, sessionId: 's', machine: createAgentMachine({ model, tools: [free.tool], retry: false, toolPolicy: policy }) });
    const output = await second.whenIdle();
    expect(output?.outcome.type).toBe('Completed');
    expect(free.log.finished).toHaveLength(1);
    expect(asked).toEqual(['call_1_0']);
    await second.close();
  });

  const broken: [string, ToolPolicy, RegExp][] = [
    ['throws', () => { throw new Error('policy service down'); }, /tool policy #1: threw: policy service down/],
    ['returns garbage', () => ({ type: 'maybe' }) as never, /tool policy #1: returned no verdict for 'write_file'/],
    ['never returns', () => new Promise(() => {}), /tool policy #1: timed out after 50 ms/],
  ];
  for (const [what, policy, message] of broken) {
    it(`a policy that ${what} fails the run with ToolPolicyError: nothing of the batch runs, the actor stays alive`, async () => {
      const { actor, ran, log } = run(policy, [{ toolCalls: [ask('write_file', { path: 'a', content: 'x' }), ask('lookup', { key: 'k' })] }], { toolPolicyTimeoutMs: 50 });
      const output = await runToCompletion(actor);
      expect(output.outcome).toMatchObject({ type: 'Failed', error: { type: 'ToolPolicyError', message: expect.stringMatching(message) } });
      expect(ran).toEqual([]);
      expect(log.started).toEqual([]);
      expect(providerValid(output.messages)).toBe(true);
    });
  }

  it('a configuration that is not a policy is a typed config error at machine creation', () => {
    const model = scriptedModel([{ text: 'x' }]);
    expect(() => createAgentMachine({ model, toolPolicy: 'allow' as never })).toThrow(InvalidConfigError);
    expect(() => createAgentMachine({ model, toolPolicy: [] })).toThrow(/toolPolicy must be a function or a non-empty list of functions/);
    expect(() => createAgentMachine({ model, toolPolicy: () => ({ type: 'allow' }), toolPolicyTimeoutMs: -1 })).toThrow(/toolPolicyTimeoutMs must be a positive/);
  });
});
