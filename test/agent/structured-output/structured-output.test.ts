import { describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { createActor, waitFor } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { runAgent, streamAgent } from '../../../src/agent/hosts/run-agent.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { StructuredOutputError } from '../../../src/errors.js';
import { InvalidConfigError } from '../../../src/errors.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import type { Model, ModelRequest } from '../../../src/model.js';

/**
 * Structured output through the driver (issue 21): the run completes only with an answer that
 * validates, an invalid one goes back with its path, the step cap and budgets get one last call,
 * and a schema that cannot be enforced is refused at machine creation.
 */

const City = z.object({ city: z.string(), population: z.number().int() });
const answer = (args: unknown) => ({ toolCalls: [{ name: 'final_answer', args }] });

/** A model with a JSON-schema mode: answers are texts, and every request is kept. */
function jsonModel(texts: readonly string[]): Model & { requests: ModelRequest[] } {
  const requests: ModelRequest[] = [];
  return {
    name: 'json-mode',
    supports: { responseFormat: 1 },
    requests,
    async generate(request) {
      // A copy: the request's list is the driver's live view of the conversation.
      requests.push({ ...request, messages: [...request.messages] });
      const turn = request.messages.filter((m) => m.role === 'assistant').length;
      const text = texts[turn];
      if (text === undefined) throw new Error(`no reply for turn ${turn + 1}`);
      return { message: { role: 'assistant', content: text }, finishReason: 'stop' };
    },
  };
}

describe('structured output: final_answer tool (a model without a JSON-schema mode)', () => {
  it('a valid answer completes the run with the typed output, kept as the final text', async () => {
    const seen: ModelRequest[] = [];
    const model = scriptedModel([(request) => (seen.push(request), answer({ city: 'Lyon', population: 520_000 }))]);
    const result = await runAgent({ model, prompt: 'A French city?', output: City });
    expect(result.outcome).toEqual({ type: 'Completed', finalText: '{"city":"Lyon","population":520000}', output: { city: 'Lyon', population: 520_000 } });
    expectTypeOf(result.output).toEqualTypeOf<{ city: string; population: number } | undefined>();
    if (result.outcome.type === 'Completed') expectTypeOf(result.outcome.output).toEqualTypeOf<{ city: string; population: number }>();
    expect(result.output).toEqual({ city: 'Lyon', population: 520_000 });
    // The model was offered the answer's tool with the schema, and no response format.
    expect(seen[0]!.tools.map((t) => t.name)).toEqual(['final_answer']);
    expect(seen[0]!.tools[0]!.inputSchema).toMatchObject({ type: 'object', required: ['city', 'population'] });
    expect(seen[0]!.responseFormat).toBeUndefined();
    // The transcript ends with the answer as text: no dangling tool call.
    expect(result.messages.at(-1)).toEqual({ role: 'assistant', content: '{"city":"Lyon","population":520000}' });
  });

  it('an invalid answer goes back with its path and message; the fixed one completes', async () => {
    const model = scriptedModel([answer({ city: 'Lyon', population: 'many' }), answer({ city: 'Lyon', population: 520_000 })]);
    const rejected: StructuredOutputError[] = [];
    let result;
    for await (const event of streamAgent({ model, prompt: 'A French city?', output: City })) {
      if (event.type === 'output.rejected') rejected.push(event.error);
      if (event.type === 'done') result = event.result;
    }
    expect(result!.outcome.type).toBe('Completed');
    expect(result!.output).toEqual({ city: 'Lyon', population: 520_000 });
    expect(rejected.map((e) => e.path)).toEqual(['population']);
    const feedback = result!.messages.find((m) => m.role === 'user' && m.content.startsWith('Your answer'));
    expect(feedback?.content).toContain('- at population: Invalid input: expected number, received string');
    expect(feedback?.content).toContain('Call final_answer again');
  });

  it('an answer that never validates fails the run StructuredOutputError naming the path, after outputRetries', async () => {
    const bad = answer({ city: 'Lyon', population: 1.5 });
    const calls: number[] = [];
    const model = scriptedModel([0, 1, 2, 3, 4].map((n) => () => (calls.push(n), bad)));
    const result = await runAgent({ model, prompt: 'A French city?', output: City, outputRetries: 1 });
    expect(calls).toEqual([0, 1]); // the first answer and one retry
    expect(result.outcome).toMatchObject({ type: 'Failed', error: { type: 'StructuredOutputError' } });
    expect(result.outcome.type === 'Failed' && result.outcome.error.message).toMatch(/after 2 attempts: at population: /);
    expect(StructuredOutputError.isInstance(result.error)).toBe(true);
    expect((result.error as StructuredOutputError).path).toBe('population');
    expect(result.output).toBeUndefined();
  });

  it('outputRetries count per run: the next run of the same actor retries as many times', async () => {
    const replies = [{ population: 'many' }, { population: 520_000 }, { population: 'few' }, { population: 860_000 }];
    let call = 0;
    const model: Model = {
      name: 'counted',
      generate: async () => {
        const args = { city: 'Lyon', ...replies[call]! };
        call++;
        return { message: { role: 'assistant', content: '', toolCalls: [{ id: `a${call}`, name: 'final_answer', args }] }, finishReason: 'tool-calls' };
      },
    };
    // An actor without a prompt lives on between runs.
    const actor = createActor(createAgentMachine({ model, output: City, outputRetries: 1 })).start();
    for (const [run, population] of [[1, 520_000], [2, 860_000]] as const) {
      actor.send({ type: 'input', message: 'A French city?' });
      await waitFor(actor, (s) => s.value === 'Idle' && s.context.runIndex === run, { timeout: 5_000 });
      expect(actor.getSnapshot().context.lastRun?.outcome).toMatchObject({ type: 'Completed', output: { city: 'Lyon', population } });
    }
    actor.stop();
  });

  it('plain text that is valid JSON is accepted; other text is asked for again through the tool', async () => {
    const model = scriptedModel([{ text: 'Lyon, I think.' }, { text: '```json\n{"city":"Lyon","population":1}\n```' }]);
    const result = await runAgent({ model, prompt: 'A French city?', output: City });
    expect(result.output).toEqual({ city: 'Lyon', population: 1 });
    expect(result.messages.some((m) => m.role === 'user' && m.content.includes('call final_answer with the answer'))).toBe(true);
  });

  it('final_answer called beside another tool is answered with an error, the other tool runs, the run goes on', async () => {
    const ran: string[] = [];
    const lookup = defineTool({ name: 'lookup', description: 'Looks up.', input: z.object({ q: z.string() }), execute: ({ q }) => (ran.push(q), 'Lyon: 520000') });
    const model = scriptedModel([
      { toolCalls: [{ name: 'lookup', args: { q: 'Lyon' } }, { name: 'final_answer', args: { city: 'Lyon', population: 1 } }] },
      answer({ city: 'Lyon', population: 520_000 }),
    ]);
    const result = await runAgent({ model, prompt: 'A French city?', tools: [lookup], output: City });
    expect(ran).toEqual(['Lyon']);
    const refused = result.messages.find((m) => m.role === 'tool' && m.toolName === 'final_answer');
    expect(refused).toMatchObject({ isError: true });
    expect(refused?.content).toContain('call final_answer alone');
    expect(result.output).toEqual({ city: 'Lyon', population: 520_000 });
  });
});

describe('structured output: the provider JSON-schema mode', () => {
  it('a model that reads the response format gets it on every call and no final_answer tool', async () => {
    const model = jsonModel(['{"city":"Lyon"}', '{"city":"Lyon","population":520000}']);
    const result = await runAgent({ model, prompt: 'A French city?', output: City });
    expect(result.output).toEqual({ city: 'Lyon', population: 520_000 });
    expect(model.requests).toHaveLength(2);
    for (const request of model.requests) {
      expect(request.tools).toEqual([]);
      expect(request.responseFormat).toMatchObject({ type: 'json', name: 'final_answer', schema: { type: 'object', required: ['city', 'population'] } });
      expect(request.responseFormat!.schema.$schema).toBeUndefined();
    }
    expect(model.requests[1]!.messages.at(-1)).toMatchObject({ role: 'user', content: expect.stringContaining('- at population: ') });
    expect(model.requests[1]!.messages.at(-1)!.content).toContain('Reply again with only the corrected answer, as JSON.');
  });

  it('a JSON Schema object is enforced as given (unknown output type)', async () => {
    const schema = { type: 'object', properties: { n: { type: 'integer', minimum: 1 } }, required: ['n'] };
    const model = jsonModel(['{"n":0}', '{"n":2}']);
    const result = await runAgent({ model, prompt: 'A number?', output: schema });
    expectTypeOf(result.output).toEqualTypeOf<unknown>();
    expect(result.output).toEqual({ n: 2 });
    expect(model.requests[1]!.messages.at(-1)!.content).toContain('- at n: ');
  });
});

describe('structured output: one last call at the step cap and at a budget', () => {
  const looping = (answerText: string) => {
    const lookup = defineTool({ name: 'lookup', description: 'Looks up.', input: z.object({}), execute: () => 'nothing yet' });
    const requests: ModelRequest[] = [];
    const model = scriptedModel(
      Array.from({ length: 6 }, () => (request: ModelRequest) => {
        requests.push({ ...request, messages: [...request.messages] });
        return request.messages.at(-1)?.content.startsWith('This run has reached') ? answer(JSON.parse(answerText)) : { toolCalls: [{ name: 'lookup', args: {} }] };
      }),
    );
    return { lookup, model, requests };
  };

  it('maxTurns: a final call offers only final_answer and its valid answer completes the run', async () => {
    const { lookup, model, requests } = looping('{"city":"Lyon","population":3}');
    const result = await runAgent({ model, prompt: 'A city?', tools: [lookup], output: City, policy: { maxTurns: 2 } });
    expect(result.outcome.type).toBe('Completed');
    expect(result.output).toEqual({ city: 'Lyon', population: 3 });
    expect(requests).toHaveLength(3);
    expect(requests[2]!.tools.map((t) => t.name)).toEqual(['final_answer']);
    expect(requests[2]!.messages.at(-1)!.content).toContain('the turn limit');
  });

  it('maxTurns with finalOutputCall: false ends MaxTurnsExceeded without the extra call', async () => {
    const { lookup, model, requests } = looping('{"city":"Lyon","population":3}');
    const result = await runAgent({ model, prompt: 'A city?', tools: [lookup], output: City, policy: { maxTurns: 2 }, finalOutputCall: false });
    expect(result.outcome).toEqual({ type: 'MaxTurnsExceeded' });
    expect(requests).toHaveLength(2);
  });

  it('an invalid answer to the final call ends the run as it would have ended (no retry)', async () => {
    const { lookup, model, requests } = looping('{"city":"Lyon"}');
    const result = await runAgent({ model, prompt: 'A city?', tools: [lookup], output: City, policy: { maxTurns: 2 } });
    expect(result.outcome).toEqual({ type: 'MaxTurnsExceeded' });
    expect(requests).toHaveLength(3);
  });

  it('a budget: the final call comes before the seal; a model that still calls tools is not run and the run is sealed', async () => {
    const { lookup, model, requests } = looping('{"city":"Lyon","population":3}');
    const result = await runAgent({ model, prompt: 'A city?', tools: [lookup], output: City, budget: { maxToolCalls: 1 } });
    expect(result.output).toEqual({ city: 'Lyon', population: 3 });
    expect(requests.at(-1)!.messages.at(-1)!.content).toContain('its budget (budget: 2 tool calls made, limit 1)');

    const stubborn = scriptedModel(Array.from({ length: 5 }, () => ({ toolCalls: [{ name: 'lookup', args: {} }] })));
    const ran: number[] = [];
    const counted = defineTool({ name: 'lookup', description: 'Looks up.', input: z.object({}), execute: () => (ran.push(1), 'x') });
    const sealed = await runAgent({ model: stubborn, prompt: 'A city?', tools: [counted], output: City, budget: { maxToolCalls: 1 } });
    expect(sealed.outcome).toEqual({ type: 'Sealed', reason: 'budget: 2 tool calls made, limit 1' });
    expect(ran).toHaveLength(2); // nothing ran after the final call
  });
});

describe('structured output: a steer that arrives during the final call', () => {
  it("does not turn the final call's valid answer into MaxTurnsExceeded: the run completes with it, the steer kept in the conversation", async () => {
    const lookup = defineTool({ name: 'lookup', description: 'Looks up.', input: z.object({}), execute: () => 'nothing yet' });
    let asked!: () => void;
    const finalAsked = new Promise<void>((resolve) => (asked = resolve));
    const model = scriptedModel(
      Array.from({ length: 5 }, () => async (request: ModelRequest) => {
        if (!String(request.messages.at(-1)?.content).startsWith('This run has reached')) return { toolCalls: [{ name: 'lookup', args: {} }] };
        asked();
        await new Promise((resolve) => setTimeout(resolve, 50));
        return answer({ city: 'Lyon', population: 3 });
      }),
    );
    const actor = createActor(createAgentMachine({ model, tools: [lookup], output: City, policy: { maxTurns: 2 } })).start();
    actor.send({ type: 'input', message: 'A city?' });
    await finalAsked;
    actor.send({ type: 'steer', message: 'and its river' });
    const idle = await waitFor(actor, (snapshot) => snapshot.value === 'Idle' && snapshot.context.runIndex === 1, { timeout: 3_000 });
    expect(idle.context.lastRun?.outcome).toEqual({ type: 'Completed', finalText: '{"city":"Lyon","population":3}', output: { city: 'Lyon', population: 3 } });
    expect(idle.context.brain.context.history.at(-1)).toEqual({ role: 'user', content: 'and its river' });
    actor.stop();
  });
});

describe('structured output: the time budget passing while a call is in flight', () => {
  /** A tool that would take 10 s and honours its signal. */
  const slow = defineTool({
    name: 'slow',
    description: 'Takes its time.',
    input: z.object({}),
    execute: (_args, { signal }) => new Promise((resolve) => signal.addEventListener('abort', () => resolve('stopped'), { once: true })),
  });
  /** A model that, unless asked for the answer, asks for `slow` (`stuck`: never replies, honouring its signal). */
  const model = (stuck: boolean) => {
    const requests: ModelRequest[] = [];
    const reply = (request: ModelRequest) => {
      requests.push({ ...request, messages: [...request.messages] });
      if (String(request.messages.at(-1)?.content).startsWith('This run has reached')) return Promise.resolve(answer({ city: 'Lyon', population: 3 }));
      if (!stuck) return Promise.resolve({ toolCalls: [{ name: 'slow', args: {} }] });
      return new Promise<never>((_, reject) => request.signal.addEventListener('abort', () => reject(request.signal.reason), { once: true }));
    };
    return { requests, model: scriptedModel(Array.from({ length: 4 }, () => reply)) };
  };
  const within = <T,>(promise: Promise<T>) =>
    Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error('still running after 5 s')), 5_000))]);

  it('a tool batch cut by the deadline is followed by the final call, as the budget passed between steps is', async () => {
    const { model: m, requests } = model(false);
    const result = await within(runAgent({ model: m, prompt: 'A city?', tools: [slow], output: City, budget: { maxDurationMs: 200 } }));
    expect(result.outcome.type).toBe('Completed');
    expect(result.output).toEqual({ city: 'Lyon', population: 3 });
    expect(requests).toHaveLength(2);
    expect(requests[1]!.tools.map((t) => t.name)).toEqual(['final_answer']);
    expect(requests[1]!.messages.at(-1)!.content).toMatch(/its budget \(budget: \d+ ms elapsed, limit 200 ms\)/);
    // The call cut by the deadline is answered interrupted, as a seal answers it.
    expect(result.messages.find((m) => m.role === 'tool')?.content).toMatch(/interrupted/);
  });

  it('a model call cut by the deadline is not made again as the final call (it has no deadline): the run is sealed at its budget', async () => {
    const { model: m, requests } = model(true);
    const result = await within(runAgent({ model: m, prompt: 'A city?', tools: [slow], output: City, budget: { maxDurationMs: 200 } }));
    expect(result.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/^budget: \d+ ms elapsed, limit 200 ms$/) });
    expect(requests).toHaveLength(1);
  });

  it('with finalOutputCall: false the deadline seals the run at once, as before', async () => {
    const { model: m, requests } = model(false);
    const result = await within(runAgent({ model: m, prompt: 'A city?', tools: [slow], output: City, budget: { maxDurationMs: 200 }, finalOutputCall: false }));
    expect(result.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/^budget: \d+ ms elapsed, limit 200 ms$/) });
    expect(requests).toHaveLength(1);
  });
});

describe('structured output: a schema that cannot be enforced is refused at machine creation', () => {
  const model = scriptedModel([{ text: 'x' }]);
  const refused = (output: unknown, pattern: RegExp) => {
    let error: unknown;
    try {
      createAgentMachine({ model, output: output as never });
    } catch (caught) {
      error = caught;
    }
    expect(InvalidConfigError.isInstance(error), String(error)).toBe(true);
    expect((error as Error).message).toMatch(pattern);
  };

  it('names what is wrong', () => {
    refused(z.string(), /must describe an object/);
    refused(z.object({ when: z.date() }), /no JSON Schema form .*Date/);
    refused(z.object({ n: z.string().transform((s) => s.length) }), /no JSON Schema form .*Transforms/);
    refused({ type: 'array', items: { type: 'string' } }, /must describe an object/);
    refused({ type: 'object', properties: { a: { type: 'strange' } } }, /output\.properties\.a/);
    refused({ type: 'object', if: { properties: {} }, then: {} }, /cannot be used for validation/);
    refused('an object please', /zod 4 schema or a JSON Schema object/);
    refused({ _def: {} }, /zod 3/);
    expect(() => createAgentMachine({ model, output: City, outputRetries: -1 })).toThrow(/outputRetries/);
    expect(() => createAgentMachine({ model, outputRetries: 1 })).toThrow(/need an output schema/);
    // A tool already called final_answer: the answer's tool cannot be added.
    const taken = defineTool({ name: 'final_answer', description: 'x', input: z.object({}), execute: () => 'x' });
    expect(() => createAgentMachine({ model, tools: [taken], output: City })).toThrow(/final_answer/);
  });

  it('an agent without output sends no response format and offers no answer tool (unchanged)', async () => {
    const seen: ModelRequest[] = [];
    const actor = createActor(createAgentMachine({ model: scriptedModel([(r) => (seen.push(r), { text: 'hi' })]) }), { input: { prompt: 'hi' } }).start();
    const done = await waitFor(actor, (s) => s.status === 'done', { timeout: 5_000 });
    expect(done.output!.outcome).toEqual({ type: 'Completed', finalText: 'hi' });
    expect(seen[0]!.tools).toEqual([]);
    expect('responseFormat' in seen[0]!).toBe(false);
    expect('outputState' in done.context).toBe(false);
  });
});
