/** The agent inside a larger statechart, operations composed around it, and inspection of a run. */
import { describe, expect, it } from 'vitest';
import { assign, createActor, sendTo, setup, waitFor, type AnyActorRef, type InspectionEvent } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { type AgentOutput } from '../../../src/agent/protocol/actor-types.js';
import type { Operation } from '../../../src/agent/operations/operation.js';
import { summarizingInspector } from '../../../src/inspect.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import type { Message } from '../../../src/schemas.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { DuplicateToolError } from '../../../src/tools/errors.js';
import { addTool, echoTool, holdable, recording, rootStateValues, runToCompletion, WAIT_MS } from '../../support/driver.js';

const user = (content: string): Message => ({ role: 'user', content });

const dedupe = <T>(values: T[]): T[] =>
  values.filter((v, i) => i === 0 || JSON.stringify(v) !== JSON.stringify(values[i - 1]));

describe('the agent invoked as a child of a parent machine', () => {
  const ticketMachine = (agent: ReturnType<typeof createAgentMachine>) =>
    setup({
      types: {
        context: {} as { answer: AgentOutput | null },
        events: {} as { type: 'abandon' },
      },
      actors: { agent },
    }).createMachine({
      id: 'ticket',
      initial: 'Answering',
      context: { answer: null },
      states: {
        Answering: {
          invoke: {
            id: 'agent',
            src: 'agent',
            input: { prompt: 'What is 2 + 3?', sessionId: 'ticket-42' },
            onDone: { target: 'Replied', actions: assign({ answer: ({ event }) => event.output }) },
            onError: 'Escalated',
          },
          on: { abandon: { actions: sendTo('agent', { type: 'cancel' }) } },
        },
        Replied: { type: 'final' },
        Escalated: { type: 'final' },
      },
    });

  it('the parent gets the run output and moves on', async () => {
    const model = recording(
      scriptedModel([
        { toolCalls: [{ name: 'add', args: { a: 2, b: 3 } }], usage: { inputTokens: 5, outputTokens: 1 } },
        { text: '2 + 3 = 5', usage: { inputTokens: 9, outputTokens: 2 } },
      ]),
    );
    const parent = createActor(ticketMachine(createAgentMachine({ model, tools: [addTool] })));
    parent.start();
    const done = await waitFor(parent, (s) => s.status === 'done', { timeout: WAIT_MS });
    expect(done.value).toBe('Replied');
    expect(done.context.answer).toEqual({
      outcome: { type: 'Completed', finalText: '2 + 3 = 5' },
      messages: [
        user('What is 2 + 3?'),
        { role: 'assistant', content: '', toolCalls: [{ id: 'call_1_0', name: 'add', args: { a: 2, b: 3 } }] },
        { role: 'tool', toolCallId: 'call_1_0', toolName: 'add', content: '5' },
        { role: 'assistant', content: '2 + 3 = 5' },
      ],
      usage: { inputTokens: 14, outputTokens: 3 },
    });
    expect(model.seen.map((r) => r.idempotencyKey)).toEqual(['ticket-42:run-1:turn-1:model', 'ticket-42:run-1:turn-2:model']);
  });

  it('a parent can cancel its child: the parent still gets the (Cancelled) output', async () => {
    const h = holdable(scriptedModel([{ text: 'never' }]));
    const entered = h.hold();
    const parent = createActor(ticketMachine(createAgentMachine({ model: h.model })));
    parent.start();
    await entered;
    parent.send({ type: 'abandon' });
    const done = await waitFor(parent, (s) => s.status === 'done', { timeout: WAIT_MS });
    expect(done.value).toBe('Replied');
    expect(done.context.answer).toEqual({
      outcome: { type: 'Cancelled' },
      messages: [user('What is 2 + 3?')],
      usage: { inputTokens: 0, outputTokens: 0 },
    });
    expect(h.seen[0]!.signal.aborted).toBe(true);
  });
});

describe('inspection', () => {
  const script = () =>
    scriptedModel([{ toolCalls: [{ name: 'echo', args: { text: 'x' } }] }, { text: 'done' }]);

  it("shows the brain's state names (AwaitingModel, AwaitingTools) during a run", async () => {
    const events: InspectionEvent[] = [];
    const actor = createActor(createAgentMachine({ model: script(), tools: [echoTool] }), {
      input: { prompt: 'go' },
      inspect: (e) => events.push(e),
    });
    await runToCompletion(actor);

    expect(dedupe(rootStateValues(events, actor.sessionId))).toEqual([
      { Running: 'AwaitingModel' },
      // No approvals configured: the batch runs without entering the approval region.
      { Running: { AwaitingTools: 'Executing' } },
      { Running: 'AwaitingModel' },
      'Done',
    ]);
    const brainValues = events
      .filter((e) => e.type === '@xstate.snapshot' && e.actorRef === actor)
      .map((e) => (e as unknown as { snapshot: { context: { brain: { value: string } } } }).snapshot.context.brain.value);
    expect(dedupe(brainValues)).toEqual(['AwaitingModel', 'AwaitingTools', 'AwaitingModel', 'Terminal']);
    // One IO actor for the agent's life; the inspector sees each request the chart hands it.
    const idOf = (e: InspectionEvent) => (e.actorRef as AnyActorRef).id;
    const children = events.filter((e) => e.type === '@xstate.actor' && e.actorRef !== actor).map(idOf);
    expect(children).toEqual(['io']);
    const requests = events
      .filter((e) => e.type === '@xstate.event' && idOf(e) === 'io' && e.actorRef !== actor)
      .map((e) => (e as { event: { type: string } }).event.type)
      .filter((type) => !type.startsWith('xstate.'));
    expect(requests).toEqual(['model', 'tools', 'model']);
  });

  it('summarizingInspector summarizes the conversation the driver carries', async () => {
    const events: InspectionEvent[] = [];
    const history: Message[] = Array.from({ length: 10 }, (_, i) => user(`old ${i}`));
    const actor = createActor(createAgentMachine({ model: scriptedModel([{ text: 'done' }]) }), {
      input: { prompt: 'go', history },
      inspect: summarizingInspector((e) => events.push(e), { lastMessages: 2 }),
    });
    await runToCompletion(actor);
    const last = events.filter((e) => e.type === '@xstate.snapshot' && e.actorRef === actor).at(-1)!;
    const brain = (last as unknown as { snapshot: { context: { brain: { context: { history: unknown } } } } }).snapshot.context.brain;
    // 12 messages in the committed history: an inspector should get a summary, not the list.
    expect(brain.context.history).toEqual({ count: 12, last: [user('go'), { role: 'assistant', content: 'done' }] });
  });
});

describe('operations', () => {
  it('compose in order: one contributes a tool and a prompt part, one rewrites the request', async () => {
    const lookup = defineTool({
      name: 'lookup',
      description: 'Looks a key up',
      input: z.object({ key: z.string() }),
      execute: ({ key }) => `value of ${key}`,
    });
    const hooks: string[] = [];
    const lookupOp: Operation = {
      name: 'lookup',
      tools: [lookup],
      prompt: (ctx) => `You can look things up (turn ${ctx.turn}).`,
      afterReply: (reply, ctx) => void hooks.push(`afterReply:${ctx.turn}:${reply.finishReason}`),
      beforeTools: (calls, ctx) => void hooks.push(`beforeTools:${ctx.turn}:${calls.map((c) => c.call.name).join(',')}`),
    };
    const redactOp: Operation = {
      name: 'redact',
      prepareRequest: (request) => ({
        messages: request.messages.map((m) =>
          m.role === 'user' ? { ...m, content: m.content.replaceAll('SECRET', '[redacted]') } : m,
        ),
        tools: request.tools.filter((t) => t.name !== 'echo'),
      }),
    };
    const model = recording(
      scriptedModel([{ toolCalls: [{ name: 'lookup', args: { key: 'color' } }] }, { text: 'The color is value of color.' }]),
    );
    const machine = createAgentMachine({ model, tools: [echoTool], operations: [lookupOp, redactOp] });
    const output = await runToCompletion(createActor(machine, { input: { prompt: 'What is SECRET?' } }));

    const a1: Message = { role: 'assistant', content: '', toolCalls: [{ id: 'call_1_0', name: 'lookup', args: { key: 'color' } }] };
    const r1: Message = { role: 'tool', toolCallId: 'call_1_0', toolName: 'lookup', content: 'value of color' };
    expect(model.seen.map((r) => r.messages)).toEqual([
      [{ role: 'system', content: 'You can look things up (turn 1).' }, user('What is [redacted]?')],
      [{ role: 'system', content: 'You can look things up (turn 2).' }, user('What is [redacted]?'), a1, r1],
    ]);
    expect(model.seen.map((r) => r.toolNames)).toEqual([['lookup'], ['lookup']]);
    expect(hooks).toEqual(['afterReply:1:tool-calls', 'beforeTools:1:lookup', 'afterReply:2:stop']);
    // Rewrites and prompt parts go to the model only: the conversation keeps what was said.
    expect(output.messages).toEqual([user('What is SECRET?'), a1, r1, { role: 'assistant', content: 'The color is value of color.' }]);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'The color is value of color.' });
  });

  it('a tool name contributed twice throws DuplicateToolError at createAgentMachine', () => {
    const model = scriptedModel([{ text: 'unused' }]);
    const otherEcho = defineTool({ name: 'echo', description: 'another echo', input: z.object({}), execute: () => '' });
    const attempt = (config: Parameters<typeof createAgentMachine>[0]) => {
      try {
        createAgentMachine(config);
      } catch (error) {
        return error;
      }
      return undefined;
    };

    const fromOperation = attempt({ model, tools: [echoTool], operations: [{ name: 'op', tools: [otherEcho] }] });
    expect(fromOperation).toBeInstanceOf(DuplicateToolError);
    expect((fromOperation as DuplicateToolError).toolName).toBe('echo');
    expect((fromOperation as Error).message).toBe('tool name "echo" is used by more than one tool; tool names must be unique');

    const fromTwoOperations = attempt({
      model,
      operations: [
        { name: 'a', tools: [echoTool] },
        { name: 'b', tools: [otherEcho] },
      ],
    });
    expect(fromTwoOperations).toBeInstanceOf(DuplicateToolError);
    expect((fromTwoOperations as DuplicateToolError).toolName).toBe('echo');

    expect(attempt({ model, tools: [echoTool], operations: [{ name: 'op', tools: [addTool] }] })).toBeUndefined();
  });
});
