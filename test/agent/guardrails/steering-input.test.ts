/**
 * Input guardrails judge every message a user sends into a run, not only the one that started it:
 * a message sent while the run goes (`steer`, or `input` during a run) is judged before any model
 * call reads it. Before, steering passed no guardrail at all: an API key an input guardrail keeps
 * from the model reached it as soon as it was sent a moment after the first message.
 */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { Guardrail, GuardrailInput } from '../../../src/agent/guardrails/guardrails.js';
import type { ModelRequest } from '../../../src/model.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';
import { defineTool } from '../../../src/tools/define-tool.js';

async function until(check: () => boolean, ms = 3_000): Promise<void> {
  for (const end = Date.now() + ms; !check(); await new Promise((resolve) => setTimeout(resolve, 5))) {
    if (Date.now() > end) throw new Error(`not so after ${ms} ms`);
  }
}

function setup() {
  const judged: GuardrailInput[] = [];
  const noKeys: Guardrail = {
    name: 'no-keys',
    check: (input) => (judged.push(input), /sk-[A-Za-z0-9]{16,}/.test(input.text) ? { type: 'trip', info: { found: 'api key' } } : { type: 'pass' }),
  };
  let release!: () => void;
  const gate = defineTool({ name: 'gate', description: 'Waits.', input: z.object({}), execute: () => new Promise<string>((resolve) => (release = () => resolve('open'))) });
  const requests: ModelRequest[] = [];
  const model = scriptedModel(
    Array.from({ length: 4 }, (_, i) => (request: ModelRequest) => (requests.push({ ...request, messages: [...request.messages] }), i === 0 ? { toolCalls: [{ id: 'g1', name: 'gate', args: {} }] } : { text: 'done' })),
  );
  const machine = createAgentMachine({ model, tools: [gate], guardrails: { input: [noKeys] } });
  return { judged, requests, machine, release: () => release() };
}

const users = (request: ModelRequest) => request.messages.filter((m) => m.role === 'user').map((m) => String(m.content));

describe('input guardrails and messages sent while a run goes', () => {
  it('a steer that trips an input guardrail ends the run before any model call reads it', async () => {
    for (const how of ['steer', 'input'] as const) {
      const { judged, requests, machine, release } = setup();
      const actor = createActor(machine).start();
      actor.send({ type: 'input', message: 'hello' });
      await until(() => requests.length === 1);
      const text = 'my key is sk-abcdefghijklmnopqrstu';
      actor.send(how === 'steer' ? { type: 'steer', message: text } : { type: 'input', message: text });
      release();
      await until(() => actor.getSnapshot().value === 'Idle');
      expect(actor.getSnapshot().context.lastRun?.outcome, how).toMatchObject({ type: 'Failed', error: { type: 'GuardrailTripped', guardrail: { name: 'no-keys', stage: 'input' } } });
      expect(requests.flatMap(users).some((content) => content.includes('sk-')), how).toBe(false);
      expect(judged.map((input) => input.text), how).toEqual(['hello', text]);
      actor.stop();
    }
  });

  it('a harmless steer is judged once, as the input, with the conversation before it, and reaches the model', async () => {
    const { judged, requests, machine, release } = setup();
    const actor = createActor(machine).start();
    actor.send({ type: 'input', message: 'hello' });
    await until(() => requests.length === 1);
    actor.send({ type: 'steer', message: 'also say hi' });
    release();
    await until(() => actor.getSnapshot().value === 'Idle');
    expect(actor.getSnapshot().context.lastRun?.outcome).toMatchObject({ type: 'Completed' });
    expect(judged.map((input) => [input.stage, input.text])).toEqual([
      ['input', 'hello'],
      ['input', 'also say hi'],
    ]);
    expect(judged[1]!.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);
    expect(users(requests.at(-1)!)).toEqual(['hello', 'also say hi']);
    actor.stop();
  });

  it('a steer a cancel kept in the conversation unjudged is judged before the next run reads it', async () => {
    const { judged, requests, machine } = setup();
    const actor = createActor(machine).start();
    actor.send({ type: 'input', message: 'hello' });
    await until(() => requests.length === 1);
    const text = 'my key is sk-abcdefghijklmnopqrstu';
    actor.send({ type: 'steer', message: text });
    actor.send({ type: 'cancel' });
    await until(() => actor.getSnapshot().value === 'Idle');
    actor.send({ type: 'input', message: 'next' });
    await until(() => actor.getSnapshot().context.runIndex === 2 && actor.getSnapshot().value === 'Idle');
    expect(actor.getSnapshot().context.lastRun?.outcome).toMatchObject({ type: 'Failed', error: { type: 'GuardrailTripped' } });
    expect(requests).toHaveLength(1);
    expect(judged.map((input) => input.text)).toEqual(['hello', 'next', text]);
    actor.stop();
  });

  it('under a durable session, a steer judged and passed is not judged again after a reopen', async () => {
    const { judged, requests, machine, release } = setup();
    const store = new MemorySessionStore();
    const session = await DurableSession.open({ machine, store, sessionId: 's' });
    session.send({ type: 'input', message: 'hello' });
    await until(() => requests.length === 1);
    session.send({ type: 'steer', message: 'also say hi' });
    release();
    const output = await session.whenIdle();
    expect(output?.outcome).toMatchObject({ type: 'Completed' });
    await session.close();
    expect(judged).toHaveLength(2);
    const reopened = await DurableSession.open({ machine, store, sessionId: 's' });
    await reopened.flush();
    expect(judged).toHaveLength(2);
    await reopened.close();
  });
});
