import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  FRESH_OUTPUT_STATE,
  checkAnswer,
  compileOutput,
  feedbackMessage,
  finalCallPolicy,
  finalCallReason,
  isOutputFeedback,
  issuePath,
  judgeAnswer,
  settleAnswer,
  withOutput,
} from '../../../src/agent/structured-output/structured-output.js';
import { feedBrain, freshBrain, type BrainState } from '../../../src/agent/core/brain-state.js';
import type { Model, ModelReply } from '../../../src/model.js';
import { PolicySchema } from '../../../src/schemas.js';

/** The structured-output rules as pure functions (src/agent/structured-output/structured-output.ts). */

const City = z.object({ city: z.string(), population: z.number().int() });
const plain: Model = { name: 'plain', generate: () => Promise.reject(new Error('not called')) };
const jsonMode: Model = { ...plain, supports: { responseFormat: 1 } };
const tool = compileOutput({ output: City }, [plain])!;
const json = compileOutput({ output: City }, [jsonMode])!;
const policy = PolicySchema.parse({ maxTurns: 3 });

/** A brain waiting for the model's reply, on turn 1. */
function awaiting(): BrainState {
  const started = feedBrain(freshBrain(), { type: 'acceptInput', message: { role: 'user', content: 'go' } });
  return feedBrain(started, { type: 'next', policy });
}
const text = (content: string): ModelReply => ({ message: { role: 'assistant', content }, finishReason: 'stop' });
const call = (args: unknown, name = 'final_answer'): ModelReply => ({ message: { role: 'assistant', content: '', toolCalls: [{ id: 'c', name, args }] }, finishReason: 'tool-calls' });

describe('compileOutput', () => {
  it('picks the JSON-schema mode for a model that reads response format version 1, else the tool', () => {
    expect(json.mode).toBe('json');
    expect(json.responseFormat).toMatchObject({ type: 'json', name: 'final_answer', schema: { type: 'object' } });
    expect(json.tool).toBeUndefined();
    expect(tool.mode).toBe('tool');
    expect(tool.tool?.definition.inputSchema).toEqual(tool.jsonSchema);
    expect(compileOutput({ output: City }, [{ ...plain, supports: { responseFormat: 0 } }])!.mode).toBe('tool');
    // A fallback list uses JSON mode only when every model reads it.
    expect(compileOutput({ output: City }, [jsonMode, plain])!.mode).toBe('tool');
    expect(compileOutput({}, [plain])).toBeUndefined();
    expect(tool.retries).toBe(2);
    expect(tool.finalCall).toBe(true);
  });
});

describe('checkAnswer and issuePath', () => {
  it('paths read as the model sees them', () => {
    expect(issuePath([])).toBe('(root)');
    expect(issuePath(['items', 0, 'price'])).toBe('items[0].price');
  });

  it('parses JSON (also inside one code fence), validates, and names each issue', () => {
    expect(checkAnswer(json, { text: '```json\n{"city":"A","population":1}\n```' })).toEqual({ ok: true, value: { city: 'A', population: 1 } });
    expect(checkAnswer(json, { text: 'A, 1' })).toMatchObject({ ok: false, issues: [{ path: '(root)', message: expect.stringMatching(/^the answer is not JSON/) }] });
    expect(checkAnswer(tool, { text: '' })).toMatchObject({ ok: false, issues: [{ message: 'the answer is empty: call final_answer with the answer' }] });
    const bad = checkAnswer(tool, { args: { population: 1.5 } });
    expect(bad.ok === false && bad.issues.map((issue) => issue.path)).toEqual(['city', 'population']);
  });
});

describe('judgeAnswer', () => {
  it('passes replies that ask for other tools, or arrive with steering queued, unchanged', () => {
    const brain = awaiting();
    const other = call({}, 'lookup');
    expect(judgeAnswer(tool, brain, FRESH_OUTPUT_STATE, other).reply).toBe(other);
    const steered = feedBrain(brain, { type: 'steer', message: { role: 'user', content: 'wait' } });
    expect(judgeAnswer(json, steered, FRESH_OUTPUT_STATE, text('nope')).rejected).toBeUndefined();
    expect(judgeAnswer(undefined, brain, undefined, text('anything')).reply.message.content).toBe('anything');
  });

  it('keeps a valid tool answer as its JSON text, a natural stop', () => {
    const step = judgeAnswer(tool, awaiting(), FRESH_OUTPUT_STATE, call({ city: 'A', population: 1 }));
    expect(step.reply).toEqual({ message: { role: 'assistant', content: '{"city":"A","population":1}' }, finishReason: 'stop' });
    expect(step.overrule).toBeUndefined();
    expect(step.rejected).toBeUndefined();
  });

  it('sends an invalid answer back (feedback steered) while retries are left, then fails naming the path', () => {
    const first = judgeAnswer(json, awaiting(), FRESH_OUTPUT_STATE, text('{"city":"A"}'));
    expect(first.state).toEqual({ rejected: 1, finalCall: null });
    expect(first.brain.context.steering[0]!.content).toContain('- at population: ');
    expect(first.overrule).toBeUndefined();
    const last = judgeAnswer(json, awaiting(), { rejected: 2, finalCall: null }, text('{"city":"A"}'));
    expect(last.overrule).toMatchObject({ type: 'Failed', error: { type: 'StructuredOutputError', message: expect.stringContaining('after 3 attempts: at population:') } });
    expect(last.rejected?.path).toBe('population');
  });

  it('in the final call, ends the run with the outcome it had reached when the answer is invalid; other calls are dropped', () => {
    const state = { rejected: 0, finalCall: { turn: 3, outcome: { type: 'MaxTurnsExceeded' as const } } };
    const mixed: ModelReply = { message: { role: 'assistant', content: 'x', toolCalls: [{ id: 'a', name: 'lookup', args: {} }, { id: 'b', name: 'final_answer', args: { city: 'A' } }] }, finishReason: 'tool-calls' };
    const step = judgeAnswer(tool, awaiting(), state, mixed);
    expect(step.overrule).toEqual({ type: 'MaxTurnsExceeded' });
    expect(step.reply.message.toolCalls).toBeUndefined();
    const ok = judgeAnswer(tool, awaiting(), state, { ...mixed, message: { ...mixed.message, toolCalls: [{ id: 'b', name: 'final_answer', args: { city: 'A', population: 2 } }, { id: 'a', name: 'lookup', args: {} }] } });
    expect(ok.overrule).toBeUndefined();
    expect(ok.reply.message).toEqual({ role: 'assistant', content: '{"city":"A","population":2}' });
  });

  it('settleAnswer applies the overrule, except over a run that already failed', () => {
    const brain = awaiting();
    const step = { brain, reply: text(''), state: FRESH_OUTPUT_STATE, overrule: { type: 'MaxTurnsExceeded' as const } };
    expect(settleAnswer(step, brain)).toMatchObject({ value: 'Terminal', context: { outcome: { type: 'MaxTurnsExceeded' } } });
    const failed = feedBrain(brain, { type: 'fail', error: { type: 'ModelError', message: 'x' } });
    expect(settleAnswer(step, failed)).toBe(failed);
  });
});

describe('the final call', () => {
  it('is due at the turn limit or a budget, once, only with finalOutputCall on', () => {
    const atLimit: BrainState = { value: 'Start', context: { ...awaiting().context, turnsTaken: 3 } };
    expect(finalCallReason(tool, FRESH_OUTPUT_STATE, atLimit, policy, null)).toEqual({ type: 'MaxTurnsExceeded' });
    expect(finalCallReason(tool, FRESH_OUTPUT_STATE, { ...atLimit, context: { ...atLimit.context, turnsTaken: 1 } }, policy, 'budget: x')).toEqual({ type: 'Sealed', reason: 'budget: x' });
    expect(finalCallReason(tool, FRESH_OUTPUT_STATE, { ...atLimit, context: { ...atLimit.context, turnsTaken: 1 } }, policy, null)).toBeNull();
    expect(finalCallReason(tool, { rejected: 0, finalCall: { turn: 3, outcome: { type: 'MaxTurnsExceeded' } } }, atLimit, policy, null)).toBeNull();
    expect(finalCallReason(compileOutput({ output: City, finalOutputCall: false }, [plain]), undefined, atLimit, policy, null)).toBeNull();
    expect(finalCallReason(undefined, undefined, atLimit, policy, null)).toBeNull();
  });

  it('allows exactly one more turn', () => {
    expect(finalCallPolicy(policy, { rejected: 0, finalCall: { turn: 3, outcome: { type: 'MaxTurnsExceeded' } } }).maxTurns).toBe(4);
    expect(finalCallPolicy(policy, FRESH_OUTPUT_STATE)).toBe(policy);
  });
});

describe('withOutput', () => {
  it('adds the parsed answer to Completed, leaves the rest', () => {
    expect(withOutput(json, { type: 'Completed', finalText: '{"city":"A","population":1}' })).toEqual({ type: 'Completed', finalText: '{"city":"A","population":1}', output: { city: 'A', population: 1 } });
    expect(withOutput(json, { type: 'MaxTurnsExceeded' })).toEqual({ type: 'MaxTurnsExceeded' });
    expect(withOutput(undefined, { type: 'Completed', finalText: 'x' })).toEqual({ type: 'Completed', finalText: 'x' });
  });
});

describe('the feedback message', () => {
  it('isOutputFeedback tells the message feedbackMessage wrote (either mode), whole, from a user message that begins the same way', () => {
    const issues = [{ path: 'population', message: 'Invalid input: expected number, received string' }];
    for (const structured of [tool, json]) expect(isOutputFeedback(feedbackMessage(structured, issues))).toBe(true);
    expect(isOutputFeedback({ role: 'user', content: 'Your answer does not match the required output schema:\nwhy?' })).toBe(false);
  });
});
