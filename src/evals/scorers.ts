import { z } from 'zod';
import type { EvalCase, Expectations } from './dataset.js';
import { canonicalJson } from '../agent/approvals/approval-binding.js';
import { argsText } from './decisions.js';
import type { CaseRun } from './run-case.js';

/*
 * Scorers: each reads a case and its new run and gives a score from 0 to 1 (true is 1, false 0),
 * with a reason, or null when it does not apply to the case (left out of its aggregate).
 */

/** What a scorer may return: a number in [0, 1], a boolean, `{ score, reason }`, or null (does not apply). */
export const ScoreValueSchema = z.union([
  z.number().min(0).max(1),
  z.boolean(),
  z.null(),
  z.strictObject({ score: z.number().min(0).max(1), reason: z.string().optional() }),
]);
export type ScoreValue = z.infer<typeof ScoreValueSchema>;

/**
 * Scores one case's run. `passAt`: a case passes this scorer with a score at least this (default
 * 1). `threshold`: the gate, the mean over the cases it applies to must reach it (default: no gate).
 *
 * @example
 * ```ts
 * const short: Scorer = { name: 'short answer', threshold: 0.9, score: (_case, run) => run.text.length < 200 };
 * ```
 */
export interface Scorer {
  name: string;
  passAt?: number | undefined;
  threshold?: number | undefined;
  /** How long one score may take, in ms (default 30 000): past it the case's score is a ScorerError. */
  timeoutMs?: number | undefined;
  score(evalCase: EvalCase, run: CaseRun, context: { signal: AbortSignal }): ScoreValue | Promise<ScoreValue>;
}

type Gate = Pick<Scorer, 'passAt' | 'threshold'>;

/**
 * Any function `(case, run) => score` as a scorer.
 *
 * @example
 * ```ts
 * const polite = scorer('polite', (_case, run) => /please|thank/i.test(run.text), { threshold: 0.8 });
 * ```
 */
export function scorer(name: string, fn: Scorer['score'], gate: Gate & { timeoutMs?: number | undefined } = {}): Scorer {
  return { name, score: fn, ...gate };
}

const verdict = (ok: boolean, reason: string) => ({ score: ok ? 1 : 0, reason });

/**
 * The last run's outcome type.
 *
 * @example
 * ```ts
 * const scorers = [outcomeIs('Completed', { threshold: 1 })];
 * ```
 */
export function outcomeIs(type: CaseRun['outcome']['type'], gate: Gate = {}): Scorer {
  return scorer(`outcome is ${type}`, (_c, run) => verdict(run.outcome.type === type, `outcome ${run.outcome.type}`), gate);
}

/** The final text equals, contains (each of), or matches. */
export function textEquals(text: string, gate: Gate = {}): Scorer {
  return scorer('text equals', (_c, run) => verdict(run.text === text, `text ${JSON.stringify(run.text.slice(0, 80))}`), gate);
}

/**
 * The final text contains each of the given strings; the score is the share found.
 *
 * @example
 * ```ts
 * const mentionsRefund = textContains(['refund', 'five days'], { passAt: 1 });
 * ```
 */
export function textContains(parts: string | readonly string[], gate: Gate = {}): Scorer {
  const wanted = typeof parts === 'string' ? [parts] : [...parts];
  return scorer('text contains', (_c, run) => {
    const missing = wanted.filter((part) => !run.text.includes(part));
    return { score: wanted.length === 0 ? 1 : (wanted.length - missing.length) / wanted.length, reason: missing.length ? `missing ${missing.map((m) => JSON.stringify(m)).join(', ')}` : 'all found' };
  }, gate);
}

/** The final text matches a regular expression. */
export function textMatches(pattern: RegExp | string, gate: Gate = {}): Scorer {
  const re = typeof pattern === 'string' ? new RegExp(pattern) : pattern;
  return scorer('text matches', (_c, run) => verdict(re.test(run.text), `${re} on ${JSON.stringify(run.text.slice(0, 80))}`), gate);
}

/**
 * The structured answer validates against a zod schema.
 *
 * @example
 * ```ts
 * const valid = outputValid(z.object({ refund: z.boolean() }));
 * ```
 */
export function outputValid(schema: z.ZodType, gate: Gate = {}): Scorer {
  return scorer('output valid', (_c, run) => {
    const parsed = schema.safeParse(run.output);
    return verdict(parsed.success, parsed.success ? 'valid' : z.prettifyError(parsed.error).split('\n').join(' '));
  }, gate);
}

/** Two JSON values alike, key order aside, whole (no answer is equal to no answer only). */
const sameJson = (a: unknown, b: unknown): boolean => (a === undefined || b === undefined ? a === b : canonicalJson(a) === canonicalJson(b));

/** The structured answer equals a JSON value (key order ignored). */
export function outputEquals(value: unknown, gate: Gate = {}): Scorer {
  return scorer('output equals', (_c, run) => verdict(sameJson(run.output, value), `output ${argsText(run.output)}`), gate);
}

/** A tool call a scorer looks for: the name, and the args when they matter. */
export interface ExpectedCall {
  name: string;
  args?: unknown;
}

const matches = (call: { name: string; args: unknown }, want: ExpectedCall) => call.name === want.name && (want.args === undefined || sameJson(call.args, want.args));

/**
 * The tool calls made. `exact`: these and no others, in order; `inOrder`: these in this order,
 * others between allowed; `any`: each made at least once. Args are compared when given.
 *
 * @example
 * ```ts
 * const looksUpFirst = toolCalls([{ name: 'lookup', args: { order: 'A1' } }, { name: 'refund' }], 'inOrder');
 * ```
 */
export function toolCalls(calls: readonly ExpectedCall[], order: 'exact' | 'inOrder' | 'any' = 'inOrder', gate: Gate = {}): Scorer {
  return scorer(`tool calls (${order})`, (_c, run) => {
    const made = run.toolCalls;
    const names = made.map((call) => `${call.name}(${argsText(call.args)})`).join(', ') || 'none';
    if (order === 'exact') return verdict(made.length === calls.length && calls.every((want, i) => matches(made[i]!, want)), `made ${names}`);
    if (order === 'any') {
      const found = calls.filter((want) => made.some((call) => matches(call, want)));
      return { score: calls.length ? found.length / calls.length : 1, reason: `made ${names}` };
    }
    let at = 0;
    for (const call of made) if (at < calls.length && matches(call, calls[at]!)) at++;
    return verdict(at === calls.length, `made ${names}`);
  }, gate);
}

/**
 * No tool outside `allowed` was called (the subset check).
 *
 * @example
 * ```ts
 * const readOnly = toolsWithin(['lookup', 'search']);
 * ```
 */
export function toolsWithin(allowed: readonly string[], gate: Gate = {}): Scorer {
  return scorer('tools within', (_c, run) => {
    const outside = [...new Set(run.toolCalls.map((call) => call.name))].filter((name) => !allowed.includes(name));
    return verdict(outside.length === 0, outside.length ? `called ${outside.join(', ')}` : 'only allowed tools');
  }, gate);
}

/**
 * Turns, tokens and cost of the case's runs within a budget.
 *
 * @example
 * ```ts
 * const cheap = withinBudget({ maxTurns: 4, maxTokens: 2_000 });
 * ```
 */
export function withinBudget(budget: { maxTurns?: number | undefined; maxTokens?: number | undefined; maxCostUsd?: number | undefined }, gate: Gate = {}): Scorer {
  return scorer('within budget', (_c, run) => {
    const tokens = run.usage.inputTokens + run.usage.outputTokens;
    const over = [
      budget.maxTurns !== undefined && run.turns > budget.maxTurns && `${run.turns} turns > ${budget.maxTurns}`,
      budget.maxTokens !== undefined && tokens > budget.maxTokens && `${tokens} tokens > ${budget.maxTokens}`,
      budget.maxCostUsd !== undefined && (run.costUsd ?? 0) > budget.maxCostUsd && `$${run.costUsd} > $${budget.maxCostUsd}`,
    ].filter((item): item is string => typeof item === 'string');
    return verdict(over.length === 0, over.length ? over.join('; ') : `${run.turns} turns, ${tokens} tokens`);
  }, gate);
}

/** The case's runs took at most `maxMs` of wall time. */
export function latencyUnder(maxMs: number, gate: Gate = {}): Scorer {
  return scorer('latency', (_c, run) => verdict(run.ms <= maxMs, `${Math.round(run.ms)} ms`), gate);
}

/**
 * Guardrail verdicts: none of the named guardrails (all, when none named) tripped or failed.
 *
 * @example
 * ```ts
 * const clean = noGuardrailTrips(['pii']);
 * ```
 */
export function noGuardrailTrips(names?: readonly string[], gate: Gate = {}): Scorer {
  return scorer('guardrails passed', (_c, run) => {
    const bad = run.guardrails.filter((g) => (!names || names.includes(g.name)) && (g.verdict === 'trip' || g.verdict === 'error'));
    return verdict(bad.length === 0, bad.length ? bad.map((g) => `${g.name}: ${g.verdict}`).join(', ') : `${run.guardrails.length} verdict(s), none tripped`);
  }, gate);
}

/**
 * The run decides as the recording did, step for step (null for a hand-written case).
 *
 * @example
 * ```ts
 * const unchanged = sameDecisions({ threshold: 1 });
 * ```
 */
export function sameDecisions(gate: Gate = {}): Scorer {
  return scorer('same decisions', (_c, run) => {
    if (run.difference === undefined) return null;
    const d = run.difference;
    return verdict(d === null, d ? `step ${d.step}: recorded ${d.recorded?.what ?? '(end)'}, got ${d.got?.what ?? '(end)'}` : `${run.decisions.length} decisions as recorded`);
  }, gate);
}

/** The scorers one expectation key gives, named `expect.<key>`. */
const EXPECTATION_SCORERS: { [K in keyof Expectations]-?: (want: NonNullable<Expectations[K]>) => Scorer } = {
  outcome: (type) => outcomeIs(type as CaseRun['outcome']['type']),
  text: (want) =>
    scorer('text', (c, run) => {
      const parts = [
        want.equals !== undefined && textEquals(want.equals),
        want.contains !== undefined && textContains(want.contains),
        want.matches !== undefined && textMatches(want.matches),
      ].filter((s): s is Scorer => s !== false);
      const scores = parts.map((s) => s.score(c, run, { signal: new AbortController().signal }) as { score: number; reason: string });
      return { score: Math.min(...scores.map((s) => s.score)), reason: scores.map((s) => s.reason).join('; ') };
    }),
  output: (want) => outputEquals(want.equals),
  tools: (want) =>
    scorer('tools', (c, run) => {
      const signal = new AbortController().signal;
      const parts = [want.calls && toolCalls(want.calls as ExpectedCall[], want.order ?? 'inOrder'), want.only && toolsWithin(want.only)].filter((s): s is Scorer => Boolean(s));
      const scores = parts.map((s) => s.score(c, run, { signal }) as { score: number; reason: string });
      return scores.length ? { score: Math.min(...scores.map((s) => s.score)), reason: scores.map((s) => s.reason).join('; ') } : null;
    }),
  budget: (want) => withinBudget(want),
  maxMs: (want) => latencyUnder(want),
};

/**
 * One scorer per expectation a case can state (`expect` in its file), named `expect.<key>`: each
 * applies to the cases that state it (null for the others).
 *
 * @example
 * ```ts
 * const report = await runEval({ dataset: 'evals/support', agent: config, scorers: [...expectations(), sameDecisions()] });
 * ```
 */
export function expectations(gate: Gate = {}): Scorer[] {
  return (Object.keys(EXPECTATION_SCORERS) as (keyof Expectations)[]).map((key) =>
    scorer(`expect.${key}`, (c, run, context) => {
      const want = c.expect?.[key];
      if (want === undefined) return null;
      return (EXPECTATION_SCORERS[key] as (w: unknown) => Scorer)(want).score(c, run, context);
    }, gate),
  );
}
