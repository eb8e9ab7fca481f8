/**
 * Tool sources: tools listed once per run, before its first model call; the run keeps that set
 * (the model is offered it, replies are checked against it, the runner runs it).
 */
import { describe, expect, it } from 'vitest';
import { createActor, toPromise, waitFor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine, defineTool, type Tool, type ToolSource } from '../../../src/index.js';
import { scriptedModel } from '../../../src/testing.js';

const named = (name: string, answer = name) => defineTool({ name, description: name, input: z.object({}), execute: () => answer });

/** A source whose next listing is whatever `next` holds when it is asked. */
function source(initial: readonly Tool[]) {
  const state = { next: initial, listings: 0 };
  const src: ToolSource = {
    async listTools() {
      state.listings++;
      return state.next;
    },
  };
  return { src, state };
}

describe('tool sources', () => {
  it('are listed once per run, and a run keeps the set it listed even when the source changes during it', async () => {
    const { src, state } = source([named('a', 'first a')]);
    const model = scriptedModel([
      (request) => {
        // The source changes while the run goes: the run is not affected.
        state.next = [named('b')];
        expect(request.tools.map((tool) => tool.name)).toEqual(['fixed', 'a']);
        return { toolCalls: [{ id: '1', name: 'a', args: {} }] };
      },
      { toolCalls: [{ id: '2', name: 'a', args: {} }] },
      { text: 'run one done' },
      (request) => {
        expect(request.tools.map((tool) => tool.name)).toEqual(['fixed', 'b']);
        return { toolCalls: [{ id: '3', name: 'a', args: {} }] };
      },
      { text: 'run two done' },
    ]);
    const actor = createActor(createAgentMachine({ model, tools: [named('fixed')], toolSources: [src] }), { input: { sessionId: 's' } }).start();
    actor.send({ type: 'input', message: 'one' });
    await waitFor(actor, (s) => s.context.runIndex === 1 && s.matches('Idle'));
    expect(state.listings).toBe(1);
    actor.send({ type: 'input', message: 'two' });
    const done = await waitFor(actor, (s) => s.context.runIndex === 2 && s.matches('Idle'));
    expect(state.listings).toBe(2);
    const results = done.context.brain.context.history.filter((m) => m.role === 'tool');
    expect(results.map((m) => [m.toolCallId, m.content, m.isError ?? false])).toEqual([
      ['1', 'first a', false],
      ['2', 'first a', false],
      // Run two listed only `b`: the reply is checked against that set, and `a` is not in it.
      ['3', "tool 'a' is not available", true],
    ]);
    actor.stop();
  });

  it('a listed tool that asks for approval fails the run (approval rules are read when the agent is built)', async () => {
    const guarded = defineTool({ name: 'guarded', description: '', input: z.object({}), needsApproval: true, execute: () => 'x' });
    const { src } = source([guarded]);
    const actor = createActor(createAgentMachine({ model: scriptedModel([{ text: 'never' }]), toolSources: [src] }), { input: { prompt: 'hi' } });
    const output = await toPromise(actor.start());
    expect(output.outcome).toMatchObject({ type: 'Failed', error: { message: expect.stringContaining('cannot need approval') } });
  });

  it('a name listed twice, or a failing listing, fails the run with the reason', async () => {
    const twice = createActor(
      createAgentMachine({ model: scriptedModel([{ text: 'never' }]), tools: [named('a')], toolSources: [source([named('a')]).src] }),
      { input: { prompt: 'hi' } },
    );
    expect((await toPromise(twice.start())).outcome).toMatchObject({ type: 'Failed', error: { message: expect.stringContaining('"a" is used by more than one tool') } });
    const broken: ToolSource = { listTools: () => Promise.reject(new Error('server unreachable')) };
    const failing = createActor(createAgentMachine({ model: scriptedModel([{ text: 'never' }]), toolSources: [broken] }), { input: { prompt: 'hi' } });
    expect((await toPromise(failing.start())).outcome).toMatchObject({ type: 'Failed', error: { message: 'server unreachable' } });
  });
});
