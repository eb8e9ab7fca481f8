/**
 * A dry run of an unchanged agent decides as its recording did, whatever features the run used:
 * record a session, record it as a case, run the case against the same config with the model
 * answered from the recording. Nothing is called: the models count their calls, the tools theirs.
 */
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import type { AgentConfig } from '../../src/agent/core/config.js';
import { agentTool } from '../../src/agent/subagents/agent-tool.js';
import { recordCase } from '../../src/evals/record.js';
import { runCase, type CaseRun } from '../../src/evals/run-case.js';
import type { Model } from '../../src/model.js';
import { scriptedModel, type ScriptEntry } from '../../src/models/scripted.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { MemorySessionStore } from '../../src/stores/memory.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { callDigest } from '../../src/agent/approvals/approval-binding.js';
import type { Operation } from '../../src/agent/operations/operation.js';

/** What the outside world saw: model calls and tool runs, by name. */
type Seen = { models: string[]; tools: string[] };

/** A scripted model that notes each call it takes. */
const noted = (seen: Seen, name: string, script: ScriptEntry[]): Model => {
  const model = scriptedModel(script, { name });
  return { name, generate: (request) => (seen.models.push(name), model.generate(request)) };
};

const tool = (seen: Seen, name: string) =>
  defineTool({ name, description: name, input: z.object({ order: z.string() }), execute: ({ order }) => (seen.tools.push(name), `${name} ${order}: done`) });

/** Records one run of the config made with `make` (`host` answers what it waits for), then dry-runs the case against a fresh one. */
async function recordAndDryRun(make: (seen: Seen) => AgentConfig, host?: (session: DurableSession) => void) {
  const store = new MemorySessionStore();
  const session = await DurableSession.open({ machine: createAgentMachine(make({ models: [], tools: [] })), store, sessionId: 'rec' });
  host?.(session);
  session.send({ type: 'input', message: 'Refund order A1.' });
  const recorded = await session.whenIdle();
  await session.close();
  const evalCase = await recordCase(store, 'rec');
  const seen: Seen = { models: [], tools: [] };
  const run = await runCase(evalCase, make(seen), { model: 'recorded', timeoutMs: 10_000 });
  return { recorded: recorded!, run, seen };
}

describe('a dry run of the unchanged agent', () => {
  it('of a run that handed off: the team\'s tools are the agent\'s, and it decides as recorded', async () => {
    const { recorded, run, seen } = await recordAndDryRun((seen) => ({
      model: noted(seen, 'triage-model', [{ toolCalls: [{ id: 't1', name: 'transfer_to_billing', args: {} }] }, { text: 'unused' }]),
      instructions: 'You are triage.',
      tools: [tool(seen, 'lookup')],
      handoffs: {
        name: 'triage',
        agents: [{ name: 'billing', description: 'Refunds.', tools: [tool(seen, 'refund')], model: noted(seen, 'billing-model', [{ text: 'unused' }, { toolCalls: [{ id: 'r1', name: 'refund', args: { order: 'A1' } }] }, { text: 'Refunded A1.' }]) }],
      },
    }));
    expect(recorded.outcome).toEqual({ type: 'Completed', finalText: 'Refunded A1.' });
    expect(run.outcome).toEqual(recorded.outcome);
    expect(run.difference).toBeNull();
    expect(run.decisions.map((d) => d.kind)).toEqual(['model', 'tools', 'handoff', 'model', 'tools', 'model', 'done']);
    expect(run.toolCalls.map((call) => [call.name, call.source])).toEqual([['transfer_to_billing', 'live'], ['refund', 'recorded']]);
    expect(seen).toEqual({ models: [], tools: [] });
  });

  it('of a run that fell back to its second model: the first model\'s recorded failure is served again, and the run falls back as it did', async () => {
    const { recorded, run, seen } = await recordAndDryRun((seen) => ({
      model: [noted(seen, 'primary', [{ error: { message: 'overloaded', status: 503, retryable: false } }, { text: 'unused' }]), noted(seen, 'backup', [{ text: 'From the backup.' }])],
    }));
    expect(recorded.outcome).toEqual({ type: 'Completed', finalText: 'From the backup.' });
    expect(run.outcome).toEqual(recorded.outcome);
    expect(run.decisions.map((d) => `${d.what} [${d.rule}]`)).toEqual([
      'fall back from primary to backup [driver: fallbackOn server-error]',
      'call the model (turn 1) offering [] [brain: CallLLM (no stop or compaction guard held); driver: the tools offered]',
      'done: Completed [brain: the reply asked for no tool (the run completes)]',
    ]);
    expect(run.difference).toBeNull();
    expect(seen).toEqual({ models: [], tools: [] });
  });

  it("of a run whose subagent asked for an approval: the child's request is the child's decision, not the parent's, and the quarantined agent tool decides as recorded", async () => {
    const { recorded, run, seen } = await recordAndDryRun((seen) => {
      const refund = defineTool({ ...tool(seen, 'refund'), needsApproval: true });
      const child = createAgentMachine({ model: noted(seen, 'child', [{ toolCalls: [{ id: 'p1', name: 'refund', args: { order: 'A1' } }] }, { text: 'Refunded A1.' }]), tools: [refund] });
      return {
        model: noted(seen, 'parent', [{ toolCalls: [{ id: 'a1', name: 'billing', args: { task: 'Refund order A1.' } }] }, { text: 'Billing refunded A1.' }]),
        tools: [agentTool({ agent: child, name: 'billing', description: 'Refunds.' })],
      };
    }, (session) => session.actor.on('approval.requested', ({ requests }) => {
      for (const request of requests) session.send({ type: 'approve', toolCallId: request.toolCallId, digest: request.digest });
    }));
    expect(recorded.outcome).toEqual({ type: 'Completed', finalText: 'Billing refunded A1.' });
    expect(run.outcome).toEqual(recorded.outcome);
    expect(run.difference).toBeNull();
    expect(run.decisions.map((d) => d.kind)).toEqual(['model', 'tools', 'model', 'done']);
    expect(run.toolCalls).toEqual([expect.objectContaining({ name: 'billing', source: 'recorded', content: 'Refunded A1.' })]);
    expect(seen).toEqual({ models: [], tools: [] });
  });

  it.each([
    ['a result given by hand', { action: 'result', result: { paid: true } }, '{"paid":true}'],
    ['a failure', { action: 'fail', reason: 'the bank says no' }, 'failed: the bank says no'],
  ] as const)('of a run whose call in doubt was answered with %s: the call takes that answer, not an unrecorded one', async (_what, decision, shown) => {
    const store = new MemorySessionStore();
    const paid: string[] = [];
    const config = (stall: boolean): AgentConfig => ({
      model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'pay', args: { amount: 3 } }] }, (request) => ({ text: `saw ${String(request.messages.at(-1)!.content)}` })]),
      tools: [
        defineTool({
          name: 'pay',
          description: 'Pays.',
          input: z.object({ amount: z.number() }),
          inDoubt: 'ask',
          execute: async ({ amount }) => {
            paid.push(String(amount));
            // The recording's process "dies" here: the call stays started with no result.
            if (stall) await new Promise((resolve) => setTimeout(resolve, 30_000));
            return `paid ${amount}`;
          },
        }),
      ],
      retry: false,
    });
    const first = await DurableSession.open({ machine: createAgentMachine(config(true)), store, sessionId: 'rec' });
    first.send({ type: 'input', message: 'Pay 3.' });
    for (let i = 0; i < 200 && paid.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    await first.flush();
    first.actor.stop();
    const second = await DurableSession.open({ machine: createAgentMachine(config(false)), store, sessionId: 'rec' });
    for (let i = 0; i < 200 && !second.actor.getSnapshot().context.doubt?.waiting.length; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    second.send({ type: 'doubt.decide', toolCallId: 'c1', digest: callDigest({ name: 'pay', args: { amount: 3 } }), ...decision });
    const recorded = await second.whenIdle();
    await second.close();
    expect(recorded!.outcome).toEqual({ type: 'Completed', finalText: `saw ${shown}` });
    const evalCase = await recordCase(store, 'rec');
    paid.length = 0;
    for (const model of ['recorded', 'live'] as const) {
      const run = await runCase(evalCase, config(false), { model, timeoutMs: 10_000 });
      expect(run.toolCalls).toEqual([{ name: 'pay', args: { amount: 3 }, content: shown, isError: decision.action === 'fail', source: 'recorded' }]);
      expect(run.outcome).toEqual(recorded!.outcome);
      expect(run.difference).toBeNull();
    }
    expect(paid).toEqual([]);
  });

  it('of a run whose host approved a call with always: the later calls of the tool are not asked again, as recorded', async () => {
    const { recorded, run, seen } = await recordAndDryRun(
      (seen) => ({
        model: noted(seen, 'model', [{ toolCalls: [{ name: 'refund', args: { order: 'A1' } }] }, { toolCalls: [{ name: 'refund', args: { order: 'B2' } }] }, { text: 'Both refunded.' }]),
        tools: [defineTool({ ...tool(seen, 'refund'), needsApproval: true })],
      }),
      (session) => session.actor.on('approval.requested', ({ requests }) => {
        for (const request of requests) session.send({ type: 'approve', toolCallId: request.toolCallId, digest: request.digest, always: true });
      }),
    );
    expect(recorded.outcome).toEqual({ type: 'Completed', finalText: 'Both refunded.' });
    expect(run.difference).toBeNull();
    expect(run.decisions.filter((d) => d.kind === 'approval').map((d) => d.what)).toEqual(['ask approval for 1 call(s)', 'approval granted']);
    expect(run.toolCalls.map((call) => [call.args, call.source])).toEqual([[{ order: 'A1' }, 'recorded'], [{ order: 'B2' }, 'recorded']]);
    expect(seen).toEqual({ models: [], tools: [] });
  });

  it('a live run of a team hands off where its model asks to: a transfer tool moves the conversation and touches nothing outside, so it runs as it is', async () => {
    const seen: Seen = { models: [], tools: [] };
    const team: AgentConfig = {
      model: noted(seen, 'triage-model', [{ toolCalls: [{ id: 't1', name: 'transfer_to_billing', args: {} }] }, { text: 'Still triage.' }]),
      instructions: 'You are triage.',
      handoffs: { name: 'triage', agents: [{ name: 'billing', description: 'Refunds.', tools: [tool(seen, 'refund')], model: noted(seen, 'billing-model', [{ text: 'unused' }, { text: 'Billing here.' }]) }] },
    };
    const run = await runCase({ format: 1, id: 'hand', input: ['Refund order A1.'] }, team);
    expect(run.decisions.map((d) => d.what)).toContain('hand off from triage to billing');
    expect(run.outcome).toEqual({ type: 'Completed', finalText: 'Billing here.' });
    expect(run.toolCalls).toEqual([{ name: 'transfer_to_billing', args: {}, content: 'Transferred to billing.', isError: false, source: 'live' }]);
    expect(seen).toEqual({ models: ['triage-model', 'billing-model'], tools: [] });
  });

  it('of a run whose budget paused and the host raised it: the recorded raise answers the pause, and the run goes on as it did', async () => {
    const { recorded, run, seen } = await recordAndDryRun(
      (seen) => ({
        model: noted(seen, 'model', [{ toolCalls: [{ name: 'lookup', args: { order: 'A1' } }] }, { toolCalls: [{ name: 'lookup', args: { order: 'B2' } }] }, { text: 'Both found.' }]),
        tools: [tool(seen, 'lookup')],
        budget: { maxToolCalls: 1, pause: true },
      }),
      (session) => session.actor.on('budget.paused', () => queueMicrotask(() => session.send({ type: 'budget.raise', budget: { maxToolCalls: 10 } }))),
    );
    expect(recorded.outcome).toEqual({ type: 'Completed', finalText: 'Both found.' });
    expect(run.outcome).toEqual(recorded.outcome);
    expect(run.difference).toBeNull();
    expect(seen).toEqual({ models: [], tools: [] });
  });

  it('of a run that fell back between two models of one name (two keys of one provider): the failure is served once, and the second takes the reply', async () => {
    const { recorded, run, seen } = await recordAndDryRun((seen) => ({
      model: [noted(seen, 'openai:gpt', [{ error: { message: 'rate limited', status: 429, retryable: false } }, { text: 'unused' }]), noted(seen, 'openai:gpt', [{ text: 'From the second key.' }])],
    }));
    expect(recorded.outcome).toEqual({ type: 'Completed', finalText: 'From the second key.' });
    expect(run.outcome).toEqual(recorded.outcome);
    expect(run.difference).toBeNull();
    expect(seen).toEqual({ models: [], tools: [] });
  });

  it("a run past the case's timeoutMs is cancelled and the case fails, naming the timeout it was given", async () => {
    const evalCase = { format: 1 as const, id: 'slow', input: ['Hello?'] };
    const hung: Model = { name: 'hung', generate: () => new Promise(() => {}) };
    const started = performance.now();
    await expect(runCase(evalCase, { model: hung }, { timeoutMs: 300 })).rejects.toThrow("case 'slow': the run did not finish within the case's timeoutMs (300 ms): cancelled");
    expect(performance.now() - started).toBeLessThan(5_000);
  });
});

describe("a case's run that waits for someone", () => {
  it("a yield nobody in an evaluation answers (an operation's, a budget pause the recording holds no raise for, a subagent's) is sealed with a reason in the evaluation's words, not runAgent's", async () => {
    const gate: Operation<{ open: boolean }, { open: boolean }> = {
      name: 'gate',
      state: { schema: z.object({ open: z.boolean() }), initial: { open: false } },
      resume: { schema: z.object({ open: z.boolean() }), apply: ({ open }) => ({ state: { open } }) },
      beforeTools: () => ({ yield: { reason: 'waiting for a person' } }),
    };
    const seen: Seen = { models: [], tools: [] };
    const twoLookups = () => noted(seen, 'm', [{ toolCalls: [{ name: 'lookup', args: { order: 'A1' } }] }, { toolCalls: [{ name: 'lookup', args: { order: 'B2' } }] }, { text: 'Both found.' }]);
    const evalCase = { format: 1 as const, id: 'waits', input: ['Look A1 and B2 up.'], toolResults: [{ name: 'lookup', content: 'found' }] };
    const reasonOf = (outcome: CaseRun['outcome']) => (outcome.type === 'Sealed' ? outcome.reason : `not sealed: ${outcome.type}`);

    const yielded = await runCase(evalCase, { model: twoLookups(), tools: [tool(seen, 'lookup')], operations: [gate] }, { timeoutMs: 10_000 });
    expect(reasonOf(yielded.outcome)).toBe("the 'gate' operation yielded (waiting for a person) and nobody answers it in an evaluation: a case's run sends only its prompts, and the budget raises its recording holds");

    const paused = await runCase(evalCase, { model: twoLookups(), tools: [tool(seen, 'lookup')], budget: { maxToolCalls: 1, pause: true } }, { timeoutMs: 10_000 });
    expect(reasonOf(paused.outcome)).toMatch(/^the 'budget' operation yielded \(.+\) and nobody answers it in an evaluation: a case's run sends only its prompts, and the budget raises its recording holds$/);

    // A subagent's yield seals the child alike; the parent reads the child's reason in the agent tool's result.
    const child = createAgentMachine({ model: scriptedModel([{ toolCalls: [{ name: 'lookup', args: { order: 'A1' } }] }, { text: 'child done' }]), tools: [tool(seen, 'lookup')], operations: [gate] });
    const parent: AgentConfig = { model: noted(seen, 'parent', [{ toolCalls: [{ name: 'helper', args: { task: 'Look A1 up.' } }] }, { text: 'Parent done.' }]), tools: [agentTool({ agent: child, name: 'helper', description: 'Helps.' })] };
    const nested = await runCase(evalCase, parent, { timeoutMs: 10_000, liveTools: ['helper'] });
    expect(nested.outcome).toEqual({ type: 'Completed', finalText: 'Parent done.' });
    expect(nested.toolCalls[0]!.content).toContain("the 'gate' operation yielded (waiting for a person) and nobody answers it in an evaluation");
    for (const run of [yielded, paused, nested]) expect(JSON.stringify(run)).not.toContain('runAgent');
    expect(seen.tools).toEqual([]);
  });
});
