/**
 * A child run's call in doubt reaches its parent: a parent reopened after a crash (here the
 * first session stopped mid-tool, as a killed process leaves it) shows the child's wait as
 * `tool.inDoubt` with the qualified id (`c1/p1`), and the decision is taken through the parent
 * (`doubt.decide` goes down the tree) or in the store (`decideDoubtStored` on the parent's id).
 * Before, nothing surfaced: the parent waited silently until the agent tool's timeout.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { AgentEmitted } from '../../../src/agent/protocol/actor-types.js';
import { agentTool } from '../../../src/agent/subagents/agent-tool.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { decideDoubtStored } from '../../../src/sessions/stored-doubt.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';
import { defineTool } from '../../../src/tools/define-tool.js';

type InDoubt = Extract<AgentEmitted, { type: 'tool.inDoubt' }>;

function setup() {
  const runs: string[] = [];
  const publish = defineTool({
    name: 'publish',
    description: 'Publishes a note.',
    input: z.object({ text: z.string() }),
    inDoubt: 'ask',
    execute: async ({ text }, ctx) => {
      runs.push(ctx.idempotencyKey);
      // The first process "dies" here.
      if (runs.length === 1) await new Promise((resolve) => setTimeout(resolve, 60_000).unref());
      return `published: ${text}`;
    },
  });
  const machine = () => {
    const writer = createAgentMachine({
      model: scriptedModel([{ toolCalls: [{ id: 'p1', name: 'publish', args: { text: 'Tea at 4.' } }] }, (req) => ({ text: `writer saw ${String(req.messages.at(-1)!.content)}` })]),
      tools: [publish],
    });
    return createAgentMachine({
      model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'writer', args: { task: 'Announce tea.' } }] }, (req) => ({ text: `parent got: ${String(req.messages.at(-1)!.content)}` })]),
      tools: [agentTool({ agent: writer, name: 'writer', description: 'Writes.', timeoutMs: 20_000 })],
    });
  };
  return { runs, machine, store: new MemorySessionStore() };
}

const until = async (done: () => boolean, what: string) => {
  for (let i = 0; i < 400 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  if (!done()) throw new Error(`not seen within 2 s: ${what}`);
};

/** The first parent stops while its child's tool runs (no close: a crash); the second opens the store again. */
async function reopenedInDoubt({ runs, machine, store }: ReturnType<typeof setup>) {
  const first = await DurableSession.open({ machine: machine(), store, sessionId: 'team' });
  first.send({ type: 'input', message: 'Tell everyone.' });
  await until(() => runs.length === 1, 'the tool started');
  await first.flush();
  first.actor.stop();
  const events: AgentEmitted[] = [];
  const second = await DurableSession.open({ machine: machine(), store, sessionId: 'team', attach: (actor) => actor.on('*', (event) => events.push(event)) });
  await until(() => events.some((event) => event.type === 'tool.inDoubt'), "the child's call in doubt at the parent");
  return { second, events, shown: events.find((event): event is InDoubt => event.type === 'tool.inDoubt')! };
}

describe("a child's call in doubt", () => {
  it('shows at the reopened parent under its qualified id, and a decision sent to the parent goes down to the child', async () => {
    const parts = setup();
    const { second, events, shown } = await reopenedInDoubt(parts);
    expect(shown.requests.map((request) => request.toolCallId)).toEqual(['c1/p1']);
    expect(shown.calls.map((call) => call.id)).toEqual(['c1/p1']);
    // A decision for a call the child does not have is refused there, and the refusal comes up under the parent's id.
    second.send({ type: 'doubt.decide', ...shown.requests[0]!, toolCallId: 'c1/p9', action: 'fail' });
    await until(() => events.some((event) => event.type === 'doubt.refused'), 'the refusal');
    expect(events.find((event) => event.type === 'doubt.refused')).toMatchObject({ toolCallId: 'c1/p9', refusal: 'unknown-call' });
    second.send({ type: 'doubt.decide', ...shown.requests[0]!, action: 'result', result: 'published by hand', by: 'ana' });
    const output = await second.whenIdle();
    expect(output?.outcome).toMatchObject({ type: 'Completed', finalText: 'parent got: writer saw published by hand' });
    expect(parts.runs).toHaveLength(1);
    await second.close();
  });

  it('is decided in the store by the id the parent showed (decideDoubtStored walks down the tree); the next open goes on', async () => {
    const parts = setup();
    const { second, shown } = await reopenedInDoubt(parts);
    await second.close();
    await decideDoubtStored(parts.store, 'team', shown.requests[0]!, { action: 'rerun', by: 'ana' });
    const third = await DurableSession.open({ machine: parts.machine(), store: parts.store, sessionId: 'team' });
    const output = await Promise.race([third.whenIdle(), new Promise<null>((resolve) => setTimeout(() => resolve(null), 5_000))]);
    expect(output?.outcome).toMatchObject({ type: 'Completed', finalText: 'parent got: writer saw published: Tea at 4.' });
    expect(parts.runs).toHaveLength(2);
    await third.close();
  });
});
