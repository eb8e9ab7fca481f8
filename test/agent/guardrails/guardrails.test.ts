import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createActor, waitFor } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { runAgent, streamAgent } from '../../../src/agent/hosts/run-agent.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { InvalidConfigError } from '../../../src/errors.js';
import { GuardrailError, GuardrailTrippedError, type Guardrail } from '../../../src/agent/guardrails/guardrails.js';
import type { ModelRequest } from '../../../src/model.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { readSessionTrace } from '../../../src/sessions/trace.js';
import { SqliteSessionStore } from '../../../src/stores/sqlite.js';

/**
 * Guardrails through the driver (issue 21 item 2): input guardrails before the first model call,
 * output guardrails on the final answer before Completed, pass / feedback / trip, a broken
 * guardrail a typed failure with the actor alive, a bad config refused at creation.
 */

const pass: Guardrail = { name: 'ok', check: () => ({ type: 'pass' }) };
const tripOn = (word: string): Guardrail => ({
  name: `no-${word}`,
  check: ({ text }) => (text.includes(word) ? { type: 'trip', info: { word } } : { type: 'pass' }),
});
/** A scripted model that counts its calls. */
function counted(replies: Parameters<typeof scriptedModel>[0]) {
  const calls: ModelRequest[] = [];
  const inner = scriptedModel(replies);
  return { calls, model: { ...inner, name: inner.name, generate: (request: ModelRequest) => (calls.push(request), inner.generate(request)) } };
}

describe('input guardrails', () => {
  it('a trip ends the run Failed(GuardrailTripped) before any model call: the model is never called', async () => {
    const { model, calls } = counted([{ text: 'never' }]);
    const result = await runAgent({ model, prompt: 'my password is hunter2', guardrails: { input: [pass, tripOn('password')] } });
    expect(calls).toHaveLength(0);
    expect(result.outcome).toEqual({
      type: 'Failed',
      error: { type: 'GuardrailTripped', message: "input guardrail 'no-password' tripped", guardrail: { name: 'no-password', stage: 'input', info: { word: 'password' } } },
    });
    expect(GuardrailTrippedError.isInstance(result.error)).toBe(true);
    const error = result.error as GuardrailTrippedError;
    expect([error.guardrail, error.stage, error.info]).toEqual(['no-password', 'input', { word: 'password' }]);
    // The refused input is not committed.
    expect(result.messages).toEqual([]);
  });

  it('they run in parallel, see the input and the history, and a pass lets the run go on', async () => {
    // Replies are picked by the count of assistant messages: the history has one.
    const { model, calls } = counted([{ text: 'unused' }, { text: 'Hello.' }]);
    const seen: string[] = [];
    let running = 0;
    let overlapped = false;
    const slow = (name: string): Guardrail => ({
      name,
      check: async ({ text, messages, stage }) => {
        running++;
        await new Promise((resolve) => setTimeout(resolve, 30));
        overlapped ||= running > 1;
        running--;
        seen.push(`${name}:${stage}:${text}:${messages.length}`);
        return { type: 'pass' };
      },
    });
    const history = [{ role: 'user' as const, content: 'earlier' }, { role: 'assistant' as const, content: 'yes' }];
    const result = await runAgent({ model, prompt: 'hi', history, guardrails: { input: [slow('a'), slow('b')] } });
    expect(result.outcome.type).toBe('Completed');
    expect(overlapped).toBe(true);
    expect(seen.sort()).toEqual(['a:input:hi:2', 'b:input:hi:2']);
    expect(calls).toHaveLength(1);
  });

  it('run only before the first model call of each run, not before later turns', async () => {
    let checks = 0;
    const counting: Guardrail = { name: 'count', check: () => (checks++, { type: 'pass' }) };
    const model = scriptedModel([{ toolCalls: [{ name: 'nope', args: {} }] }, { text: 'done' }]);
    const result = await runAgent({ model, prompt: 'go', guardrails: { input: [counting] } });
    expect(result.outcome.type).toBe('Completed');
    expect(checks).toBe(1);
  });
});

describe('output guardrails', () => {
  it('feedback goes to the model as a user message, and the next answer completes', async () => {
    const { model, calls } = counted([{ text: 'It is 42.' }, { text: 'It is 42 (source: the guide).' }]);
    const cite: Guardrail = { name: 'cite', check: ({ text }) => (text.includes('source') ? { type: 'pass' } : { type: 'feedback', message: 'Cite a source.' }) };
    const events: string[] = [];
    let result;
    for await (const event of streamAgent({ model, prompt: 'The answer?', guardrails: { output: [cite] } })) {
      if (event.type === 'guardrail.feedback') events.push(`feedback:${event.message}`);
      if (event.type === 'turn.finished') events.push(`turn:${event.turn}`);
      if (event.type === 'done') result = event.result;
    }
    expect(result!.outcome).toEqual({ type: 'Completed', finalText: 'It is 42 (source: the guide).' });
    expect(events).toEqual(['feedback:Cite a source.', 'turn:1', 'turn:2']);
    expect(calls).toHaveLength(2);
    expect(calls[1]!.messages.at(-1)).toEqual({ role: 'user', content: 'Your answer was not accepted:\nCite a source.\nAnswer again.' });
    expect(result!.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
  });

  it('maxFeedback counts per run: the next run of the same actor has its own feedback rounds', async () => {
    const { model } = counted([{ text: 'It is 42.' }, { text: 'It is 42 (source).' }, { text: 'It is 43.' }, { text: 'It is 43 (source).' }]);
    const cite: Guardrail = { name: 'cite', check: ({ text }) => (text.includes('source') ? { type: 'pass' } : { type: 'feedback', message: 'Cite a source.' }) };
    // An actor without a prompt lives on between runs.
    const actor = createActor(createAgentMachine({ model, guardrails: { output: [cite], maxFeedback: 1 } })).start();
    actor.send({ type: 'input', message: 'first' });
    await waitFor(actor, (s) => s.value === 'Idle' && s.context.runIndex === 1, { timeout: 5_000 });
    expect(actor.getSnapshot().context.lastRun?.outcome).toEqual({ type: 'Completed', finalText: 'It is 42 (source).' });
    actor.send({ type: 'input', message: 'second' });
    await waitFor(actor, (s) => s.value === 'Idle' && s.context.runIndex === 2, { timeout: 5_000 });
    expect(actor.getSnapshot().context.lastRun?.outcome).toEqual({ type: 'Completed', finalText: 'It is 43 (source).' });
    actor.stop();
  });

  it('feedback is bounded: past maxFeedback rounds the run fails GuardrailTripped', async () => {
    const { model, calls } = counted([{ text: 'a' }, { text: 'b' }, { text: 'c' }]);
    const never: Guardrail = { name: 'never', check: () => ({ type: 'feedback', message: 'No.' }) };
    const result = await runAgent({ model, prompt: 'x', guardrails: { output: [never], maxFeedback: 1 } });
    expect(calls).toHaveLength(2);
    expect(result.outcome).toMatchObject({ type: 'Failed', error: { type: 'GuardrailTripped', guardrail: { name: 'never', stage: 'output', info: { feedback: 'No.' } } } });
    expect(result.outcome.type === 'Failed' && result.outcome.error.message).toBe("output guardrail 'never' still refused the answer after 1 feedback round");
  });

  it('a trip on the answer fails the run, nothing more goes to the model, and the answer is not committed', async () => {
    const { model, calls } = counted([{ text: 'the secret is 1234' }, { text: 'never' }]);
    const result = await runAgent({ model, prompt: 'tell me', guardrails: { output: [tripOn('secret')] } });
    expect(calls).toHaveLength(1);
    expect(result.outcome).toMatchObject({ type: 'Failed', error: { type: 'GuardrailTripped', guardrail: { name: 'no-secret', stage: 'output' } } });
    expect(GuardrailTrippedError.isInstance(result.error)).toBe(true);
    expect(result.messages).toEqual([]);
    // The refused answer's tokens are still counted.
    expect(result.usage.outputTokens).toBeGreaterThan(0);
  });

  it('do not judge replies that ask for tools; with an output schema they see the parsed answer', async () => {
    const seen: unknown[] = [];
    const look: Guardrail = { name: 'look', check: ({ text, output }) => (seen.push({ text, output }), { type: 'pass' }) };
    const model = scriptedModel([{ toolCalls: [{ name: 'nope', args: {} }] }, { toolCalls: [{ name: 'final_answer', args: { city: 'Lyon' } }] }]);
    const result = await runAgent({ model, prompt: 'city?', output: z.object({ city: z.string() }), guardrails: { output: [look] } });
    expect(result.output).toEqual({ city: 'Lyon' });
    expect(seen).toEqual([{ text: '{"city":"Lyon"}', output: { city: 'Lyon' } }]);
  });
});

describe('broken guardrails and bad config', () => {
  it.each([
    ['throws', { name: 'boom', check: () => { throw new Error('kaput'); } }, "input guardrail 'boom': threw: kaput"],
    ['returns garbage', { name: 'junk', check: () => ({ type: 'maybe' }) as never }, "input guardrail 'junk': returned no verdict"],
    ['returns feedback on the input', { name: 'fb', check: () => ({ type: 'feedback', message: 'x' }) }, 'only an output guardrail may'],
    ['never returns', { name: 'hang', timeoutMs: 50, check: () => new Promise<never>(() => {}) }, "input guardrail 'hang': timed out after 50 ms"],
  ] as [string, Guardrail, string][])('one that %s fails the run GuardrailError, the model is not called, the actor lives on', async (_, broken, message) => {
    const { model, calls } = counted([{ text: 'second run' }]);
    let once = true;
    const flaky: Guardrail = { ...broken, check: (input) => (once ? ((once = false), broken.check(input)) : { type: 'pass' }) };
    const actor = createActor(createAgentMachine({ model, guardrails: { input: [flaky, pass] } }), { input: { sessionId: 's' } }).start();
    actor.send({ type: 'input', message: 'one' });
    const first = await waitFor(actor, (s) => s.matches('Idle') && s.context.runIndex === 1, { timeout: 5_000 });
    expect(first.context.lastRun!.outcome).toMatchObject({ type: 'Failed', error: { type: 'GuardrailError' } });
    expect(first.context.lastRun!.outcome.type === 'Failed' && first.context.lastRun!.outcome.error.message).toContain(message);
    expect(calls).toHaveLength(0);
    expect(first.context.guard?.check).toBeNull();
    // Alive: the next run goes through.
    actor.send({ type: 'input', message: 'two' });
    const second = await waitFor(actor, (s) => s.matches('Idle') && s.context.runIndex === 2, { timeout: 5_000 });
    expect(second.context.lastRun!.outcome).toEqual({ type: 'Completed', finalText: 'second run' });
    actor.stop();
  });

  // setTimeout holds at most 2^31 - 1 ms (24.8 days) and cuts a longer delay to 1 ms: before, a
  // guardrail given 40 days timed out at once ('timed out after 3456000000 ms'), as did a tool
  // policy and runAgent's approve. A timeout past that bound is no timeout, as a tool's is.
  it('a timeout longer than a timer can wait is no timeout: the check that answers in 50 ms passes', async () => {
    const patient: Guardrail = { name: 'patient', timeoutMs: 40 * 24 * 3_600_000, check: () => new Promise((resolve) => setTimeout(() => resolve({ type: 'pass' }), 50)) };
    const result = await runAgent({ model: scriptedModel([{ text: 'checked' }]), prompt: 'p', guardrails: { input: [patient], output: [patient] } });
    expect(result.outcome).toEqual({ type: 'Completed', finalText: 'checked' });
  });

  it('runAgent gives the GuardrailError itself', async () => {
    const result = await runAgent({ model: scriptedModel([{ text: 'x' }]), prompt: 'p', guardrails: { output: [{ name: 'boom', check: () => { throw new Error('kaput'); } }] } });
    expect(GuardrailError.isInstance(result.error)).toBe(true);
    expect((result.error as GuardrailError).guardrail).toBe('boom');
  });

  it.each([
    ['a check that is not a function', { input: [{ name: 'a', check: 'yes' }] }, 'check must be a function'],
    ['two guardrails under one name', { input: [{ name: 'a', check: () => ({ type: 'pass' }) }], output: [{ name: 'a', check: () => ({ type: 'pass' }) }] }, "guardrail name 'a' is used twice"],
    ['a bad timeout', { output: [{ name: 'a', timeoutMs: -1, check: () => ({ type: 'pass' }) }] }, 'timeoutMs must be a positive number'],
    ['a bad name', { output: [{ name: '', check: () => ({ type: 'pass' }) }] }, 'a guardrail name must be'],
    ['an unknown key', { inputs: [] }, 'guardrails: unknown option "inputs" — did you mean "input"?'],
  ])('%s is an InvalidConfigError at creation', (_, guardrails, message) => {
    const make = () => createAgentMachine({ model: scriptedModel([]), guardrails: guardrails as never });
    expect(make).toThrow(InvalidConfigError);
    expect(make).toThrow(message);
  });
});

describe('guardrails in a durable session', () => {
  const dir = mkdtempSync(join(tmpdir(), 'loopchart-guard-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('verdicts are traced and the outcome is stored with the guardrail that tripped', async () => {
    const store = new SqliteSessionStore({ path: join(dir, 'trace.db') });
    const cite: Guardrail = { name: 'cite', check: ({ text }) => (text.includes('source') ? { type: 'pass' } : { type: 'feedback', message: 'Cite a source.' }) };
    const machine = createAgentMachine({ model: scriptedModel([{ text: '42' }, { text: '42 (source: guide)' }, { text: 'secret!' }]), guardrails: { input: [tripOn('password')], output: [cite] } });
    const session = await DurableSession.open({ machine, store, sessionId: 'g' });
    session.send({ type: 'input', message: 'answer?' });
    expect((await session.whenIdle())?.outcome).toEqual({ type: 'Completed', finalText: '42 (source: guide)' });
    session.send({ type: 'input', message: 'the password is x' });
    expect((await session.whenIdle())?.outcome).toMatchObject({ type: 'Failed', error: { type: 'GuardrailTripped', guardrail: { name: 'no-password', stage: 'input', info: { word: 'password' } } } });
    await session.close();
    const entries = (await readSessionTrace(store, 'g')).flatMap((record) => ('entry' in record ? [record.entry] : []));
    expect(entries.filter((entry) => entry.type === 'guardrail').map((entry) => `${entry.run}:${entry.name}:${entry.verdict?.type}`)).toEqual([
      '1:no-password:pass',
      '1:cite:feedback',
      '1:cite:pass',
      '2:no-password:trip',
    ]);
    // Another process reads the failure with its guardrail from the row.
    const reopened = await DurableSession.open({ machine, store, sessionId: 'g' });
    expect(reopened.actor.getSnapshot().context.lastRun?.outcome).toMatchObject({ type: 'Failed', error: { guardrail: { name: 'no-password' } } });
    await reopened.close();
    await store.close();
  });

  it('an output check stopped midway goes on after a reopen: the held reply is judged, verdicts already in are not asked again', async () => {
    const store = new SqliteSessionStore({ path: join(dir, 'held.db') });
    const { model, calls } = counted([{ text: 'held answer' }, { text: 'never' }]);
    let quick = 0;
    const first: Guardrail = { name: 'quick', check: () => (quick++, { type: 'pass' }) };
    const hanging: Guardrail = { name: 'slow', check: ({ signal }) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('stopped')))) };
    const opened = await DurableSession.open({ machine: createAgentMachine({ model, guardrails: { output: [first, hanging] } }), store, sessionId: 'h' });
    opened.send({ type: 'input', message: 'q' });
    await waitFor(opened.actor, (s) => s.matches({ Running: 'Guarding' }) && s.context.guard!.check!.verdicts.length === 1, { timeout: 5_000 });
    await opened.close();
    const machine = createAgentMachine({ model, guardrails: { output: [first, { name: 'slow', check: () => ({ type: 'pass' }) }] } });
    const session = await DurableSession.open({ machine, store, sessionId: 'h' });
    expect((await session.whenIdle())?.outcome).toEqual({ type: 'Completed', finalText: 'held answer' });
    expect([calls.length, quick]).toEqual([1, 1]);
    await session.close();
    await store.close();
  });
});
