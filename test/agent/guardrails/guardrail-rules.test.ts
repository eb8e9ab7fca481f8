import { describe, expect, it } from 'vitest';
import {
  GuardrailError,
  NO_GUARD,
  checkedGuardVerdict,
  guardFeedbackMessage,
  guardOutcome,
  inputCheckDue,
  isGuardFeedback,
  openCheck,
  planGuardrails,
  runGuardrail,
  settledGuard,
  trippedFailure,
  undecidedGuardrails,
  withVerdict,
  type Guardrail,
  type GuardrailPlan,
} from '../../../src/agent/guardrails/guardrails.js';

/** The pure rules of guardrails (src/agent/guardrails/guardrails.ts), without a driver. */

const g = (name: string): Guardrail => ({ name, check: () => ({ type: 'pass' }) });
const plan = planGuardrails({ input: [g('in')], output: [g('a'), g('b')], maxFeedback: 1 }) as GuardrailPlan;
const input = { stage: 'input' as const, sessionId: 's', text: 'hi', messages: [] };

describe('guardrail rules', () => {
  it('plan: null without guardrails; one guardrail may guard both ends', () => {
    expect(planGuardrails(undefined)).toBeNull();
    expect(planGuardrails({ input: [], output: [] })).toBeNull();
    const both = g('both');
    expect(planGuardrails({ input: [both], output: [both] })?.byName.size).toBe(1);
    expect(plan.maxFeedback).toBe(1);
  });

  it('the input check is due once per run: before the first model call, until it passed, not while one is open', () => {
    const key = 's:run-1:guard-input';
    expect(inputCheckDue(plan, undefined, 0, key)).toBe(true);
    expect(inputCheckDue(plan, NO_GUARD, 1, key)).toBe(false);
    expect(inputCheckDue(plan, { ...NO_GUARD, passed: key }, 0, key)).toBe(false);
    expect(inputCheckDue(plan, { ...NO_GUARD, passed: 's:run-0:guard-input' }, 0, key)).toBe(true);
    expect(inputCheckDue(plan, openCheck(NO_GUARD, key, 'input'), 0, key)).toBe(false);
    expect(inputCheckDue(planGuardrails({ output: [g('x')] }), undefined, 0, key)).toBe(false);
  });

  it('a check waits for every verdict; the first trip decides at once; a second verdict of one guardrail is ignored', () => {
    let state = openCheck(NO_GUARD, 'k', 'output', { message: { role: 'assistant', content: 'x' } });
    expect(guardOutcome(plan, state.check!, 0)).toEqual({ type: 'open' });
    state = withVerdict(state, 'a', { type: 'pass' });
    expect(undecidedGuardrails(plan, state.check!).map((x) => x.name)).toEqual(['b']);
    expect(withVerdict(state, 'a', { type: 'trip' })).toBe(state);
    expect(guardOutcome(plan, withVerdict(state, 'b', { type: 'pass' }).check!, 0)).toEqual({ type: 'passed' });
    // b trips while a has not answered: decided.
    const tripped = guardOutcome(plan, withVerdict(openCheck(NO_GUARD, 'k', 'output'), 'b', { type: 'trip', info: { n: 1 } }).check!, 0);
    expect(tripped).toEqual({ type: 'tripped', guardrail: { name: 'b', stage: 'output', info: { n: 1 } }, message: "output guardrail 'b' tripped" });
  });

  it('feedback joins the messages of every guardrail that gave it; past the bound or with no turn left it is a trip', () => {
    const state = withVerdict(withVerdict(openCheck(NO_GUARD, 'k', 'output'), 'a', { type: 'feedback', message: 'One.' }), 'b', { type: 'feedback', message: 'Two.' });
    expect(guardOutcome(plan, state.check!, 0)).toEqual({ type: 'feedback', message: 'One.\n\nTwo.' });
    expect(guardOutcome(plan, state.check!, 1)).toMatchObject({ type: 'tripped', guardrail: { name: 'a', info: { feedback: 'One.' } } });
    expect(guardOutcome(plan, state.check!, 0, false)).toMatchObject({ type: 'tripped', message: "output guardrail 'a' still refused the answer with no turn left for another answer" });
  });

  it('settling closes the check, marks a passed input check, counts a feedback round', () => {
    const input = openCheck(NO_GUARD, 'in-key', 'input');
    expect(settledGuard(input, { type: 'passed' })).toEqual({ check: null, passed: 'in-key', feedbacks: 0 });
    const output = openCheck({ ...NO_GUARD, passed: 'in-key' }, 'out', 'output');
    expect(settledGuard(output, { type: 'feedback', message: 'm' })).toEqual({ check: null, passed: 'in-key', feedbacks: 1 });
    const trip = { type: 'tripped' as const, guardrail: { name: 'a', stage: 'input' as const }, message: 'm' };
    expect(settledGuard(input, trip).passed).toBeNull();
    expect(trippedFailure(trip)).toEqual({ type: 'GuardrailTripped', message: 'm', guardrail: { name: 'a', stage: 'input' } });
  });

  it('a verdict is checked: garbage, feedback on the input, an info that is not plain JSON are GuardrailErrors', () => {
    expect(checkedGuardVerdict('x', 'output', { type: 'feedback', message: 'ok' })).toEqual({ type: 'feedback', message: 'ok' });
    for (const [value, stage] of [[null, 'output'], [{ type: 'pass', extra: 1 }, 'output'], [{ type: 'feedback', message: '' }, 'output'], [{ type: 'feedback', message: 'm' }, 'input'], [{ type: 'trip', info: { at: new Date() } }, 'input']] as const) {
      expect(() => checkedGuardVerdict('x', stage, value)).toThrow(GuardrailError);
    }
  });

  it('runGuardrail: a check that returns at once is not timed, a slow one times out, one that throws names the guardrail', async () => {
    const run = new AbortController().signal;
    expect(await runGuardrail({ name: 'now', timeoutMs: 1, check: () => ({ type: 'pass' }) }, input, run)).toEqual({ type: 'pass' });
    let aborted = false;
    const slow: Guardrail = { name: 'slow', timeoutMs: 20, check: ({ signal }) => new Promise(() => signal.addEventListener('abort', () => (aborted = true))) };
    await expect(runGuardrail(slow, input, run)).rejects.toThrow("input guardrail 'slow': timed out after 20 ms");
    expect(aborted).toBe(true);
    const error = await runGuardrail({ name: 'boom', check: () => Promise.reject(new Error('kaput')) }, input, run).catch((e: unknown) => e);
    expect(GuardrailError.isInstance(error) && [error.guardrail, error.stage, error.message]).toEqual(['boom', 'input', "input guardrail 'boom': threw: kaput"]);
  });
});

describe('the feedback message', () => {
  it('isGuardFeedback tells the message guardFeedbackMessage wrote, whole, from a user message that begins the same way', () => {
    expect(isGuardFeedback(guardFeedbackMessage('Name your source.'))).toBe(true);
    expect(isGuardFeedback(guardFeedbackMessage('Two lines\nof feedback.'))).toBe(true);
    expect(isGuardFeedback({ role: 'user', content: 'Your answer was not accepted:\nplease be brief' })).toBe(false);
    expect(isGuardFeedback({ role: 'user', content: 'Answer again.' })).toBe(false);
  });
});
