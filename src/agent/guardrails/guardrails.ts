import { z } from 'zod';
import { LoopchartError } from '../../errors.js';
import { jsonValueProblem } from '../../json-value.js';
import { parseOptions } from '../../known-keys.js';
import type { Failure } from '../protocol/failure.js';
import type { Message, TrippedGuardrail, UserMessage } from '../../schemas.js';
import { messageOf } from '../operations/operation-rules.js';
import { InvalidConfigError } from '../../errors.js';
import { timedCheck } from '../core/timed-check.js';
import { readAnswer } from '../../read-answer.js';
import { keyOf } from '../protocol/keys.js';
import type { BrainState } from '../core/brain-state.js';
import { checkAnswer, type AnswerStep, type StructuredOutput } from '../structured-output/structured-output.js';

/**
 * Guardrails: checks on a run's input (before its first model call) and on its final answer
 * (before the run completes), run in parallel, each with a timeout. Each passes, trips (the run
 * fails `GuardrailTripped` and nothing more goes to the model), or, on the answer only, sends
 * feedback the model answers again (a bounded number of times). The rules here are pure; the
 * driver runs each check through the executor seam (kind `guardrail`) and records each verdict
 * in its context as it arrives, so a check that passed is not run again after a restore.
 */

/**
 * What a guardrail decides. `info` (plain JSON) travels with a trip into the run's failure;
 * `feedback` is sent to the model as a user message (output guardrails only).
 *
 * @example
 * ```ts
 * const verdicts: GuardrailVerdict[] = [{ type: 'pass' }, { type: 'trip', info: { rule: 'pii' } }, { type: 'feedback', message: 'Cite a source.' }];
 * ```
 */
export type GuardrailVerdict = z.infer<typeof GuardrailVerdictSchema>;

/**
 * A guardrail's verdict as loopchart checks it (a guardrail's return value, a replayed one).
 *
 * @example
 * ```ts
 * const ok = GuardrailVerdictSchema.safeParse({ type: 'feedback', message: 'Cite a source.' }).success; // true
 * ```
 */
export const GuardrailVerdictSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('pass') }),
  z.strictObject({ type: z.literal('trip'), info: z.unknown().optional() }),
  z.strictObject({ type: z.literal('feedback'), message: z.string().min(1).max(100_000) }),
]);

/**
 * Which end of a run a guardrail guards.
 *
 * @example
 * ```ts
 * const label = (stage: GuardrailStage) => (stage === 'input' ? 'before the model' : 'before the user');
 * ```
 */
export type GuardrailStage = 'input' | 'output';

/**
 * What a guardrail sees: the text it judges (the run's input message, or the final answer), the
 * conversation before it, and a signal aborted when the run stops needing the verdict or the
 * guardrail's time is up.
 *
 * @example
 * ```ts
 * const short: Guardrail = { name: 'short', check: (input: GuardrailInput) => (input.text.length < 2_000 ? { type: 'pass' } : { type: 'trip', info: { length: input.text.length } }) };
 * ```
 */
export interface GuardrailInput {
  readonly stage: GuardrailStage;
  readonly sessionId: string;
  /** The run's input message, or the final answer's text. */
  readonly text: string;
  /** The conversation before `text`: committed history, then this run's messages. */
  readonly messages: readonly Message[];
  /** An output guardrail of an agent with an `output` schema: the answer, validated and parsed. */
  readonly output?: unknown;
  readonly signal: AbortSignal;
}

/**
 * One guardrail. A guardrail that throws, returns anything but a verdict, or takes longer than
 * its `timeoutMs` fails the run with `GuardrailError` (never a silent pass).
 *
 * @example
 * ```ts
 * import { createAgentMachine, type Guardrail } from 'loopchart';
 *
 * const noSecrets: Guardrail = {
 *   name: 'no-secrets',
 *   check: ({ text }) => (/sk-[A-Za-z0-9]{20,}/.test(text) ? { type: 'trip', info: { found: 'api key' } } : { type: 'pass' }),
 * };
 * const agent = createAgentMachine({ model, guardrails: { input: [noSecrets], output: [noSecrets] } });
 * ```
 */
export interface Guardrail {
  /** Unique among the agent's guardrails: letters, digits, `_`, `-`, `.`, starting with a letter. */
  readonly name: string;
  /** How long one check may take, in ms. Default `DEFAULT_GUARDRAIL_TIMEOUT_MS`. */
  readonly timeoutMs?: number | undefined;
  check(input: GuardrailInput): GuardrailVerdict | Promise<GuardrailVerdict>;
}

/**
 * The agent's guardrails (`AgentConfig.guardrails`). One guardrail may guard both ends.
 *
 * @example
 * ```ts
 * const polite: Guardrail = { name: 'polite', check: ({ text }) => (/idiot/i.test(text) ? { type: 'feedback', message: 'Rephrase politely.' } : { type: 'pass' }) };
 * const guardrails: GuardrailsConfig = { output: [polite], maxFeedback: 1 };
 * ```
 */
export interface GuardrailsConfig {
  /** Run before the first model call of every run, on its input message. */
  readonly input?: readonly Guardrail[] | undefined;
  /** Run on the final answer before the run completes. */
  readonly output?: readonly Guardrail[] | undefined;
  /** Feedback rounds a run may take before feedback fails it `GuardrailTripped`. Default 2. */
  readonly maxFeedback?: number | undefined;
}

/**
 * How long a guardrail may take unless it says otherwise.
 *
 * @example
 * ```ts
 * const patient: Guardrail = { name: 'remote-check', timeoutMs: 2 * DEFAULT_GUARDRAIL_TIMEOUT_MS, check: async () => ({ type: 'pass' }) };
 * ```
 */
export const DEFAULT_GUARDRAIL_TIMEOUT_MS = 30_000;

/**
 * Feedback rounds a run may take by default.
 *
 * @example
 * ```ts
 * const strict: GuardrailsConfig = { output: [], maxFeedback: DEFAULT_MAX_GUARDRAIL_FEEDBACK - 1 };
 * ```
 */
export const DEFAULT_MAX_GUARDRAIL_FEEDBACK = 2;

/**
 * A guardrail threw, timed out or returned something that is not a verdict. The run fails
 * with `GuardrailError`; the error names the guardrail and its stage.
 *
 * @example
 * ```ts
 * const logged: Executor = async (effect, perform) =>
 *   perform().catch((error: unknown) => {
 *     if (GuardrailError.isInstance(error)) console.error(`guardrail ${error.guardrail} (${error.stage}) failed`);
 *     throw error;
 *   });
 * ```
 */
export class GuardrailError extends LoopchartError {
  readonly guardrail: string;
  readonly stage: GuardrailStage;
  constructor(guardrail: string, stage: GuardrailStage, problem: string, options?: { cause?: unknown }) {
    super('GuardrailFailed', `${stage} guardrail '${guardrail}': ${problem}`, options);
    this.guardrail = guardrail;
    this.stage = stage;
  }
}

/**
 * A guardrail tripped: the run ended `Failed` with type `GuardrailTripped` and nothing more was
 * sent to the model. `runAgent` and `streamAgent` give it as `result.error`; the outcome's error
 * carries the same `guardrail` (name, stage, info), also in a stored session.
 *
 * @example
 * ```ts
 * const result = await runAgent({ model, prompt: 'Hi', guardrails: { input: [{ name: 'closed', check: () => ({ type: 'trip', info: { why: 'after hours' } }) }] } });
 * if (GuardrailTrippedError.isInstance(result.error)) console.error(result.error.guardrail, result.error.stage, result.error.info);
 * ```
 */
export class GuardrailTrippedError extends LoopchartError {
  readonly guardrail: string;
  readonly stage: GuardrailStage;
  /** What the guardrail gave with its trip (plain JSON), or undefined. */
  readonly info: unknown;
  constructor(tripped: TrippedGuardrail, message: string) {
    super('GuardrailTripped', message);
    this.guardrail = tripped.name;
    this.stage = tripped.stage;
    this.info = tripped.info;
  }
}

/** The agent's guardrails, checked once at machine creation. */
export interface GuardrailPlan {
  readonly input: readonly Guardrail[];
  readonly output: readonly Guardrail[];
  readonly maxFeedback: number;
  readonly byName: ReadonlyMap<string, Guardrail>;
}

const NAME = /^[A-Za-z][\w.-]{0,99}$/;
const GuardrailShape = z.object({
  name: z.string().regex(NAME, { error: 'a guardrail name must be 1-100 letters, digits, _, - or ., starting with a letter' }),
  timeoutMs: z.number().positive({ error: 'timeoutMs must be a positive number of ms' }).optional(),
  check: z.custom((value) => typeof value === 'function', { error: 'check must be a function' }),
});
const ConfigShape = z.strictObject({
  input: z.array(GuardrailShape).optional(),
  output: z.array(GuardrailShape).optional(),
  maxFeedback: z.number().int().nonnegative({ error: 'maxFeedback must be a whole number >= 0' }).optional(),
});

/** The plan for an agent's `guardrails` (null without any); garbage (not a function, a name used twice, a bad timeout) is an `InvalidConfigError`. */
export function planGuardrails(config: unknown): GuardrailPlan | null {
  if (config === undefined) return null;
  const { maxFeedback } = parseOptions(ConfigShape, config, 'guardrails');
  const { input = [], output = [] } = config as GuardrailsConfig;
  const byName = new Map<string, Guardrail>();
  for (const guardrail of [...input, ...output]) {
    // One guardrail may guard both ends; two different ones may not share a name.
    if (byName.has(guardrail.name) && byName.get(guardrail.name) !== guardrail) throw new InvalidConfigError(`guardrail name '${guardrail.name}' is used twice`);
    byName.set(guardrail.name, guardrail);
  }
  if (input.length === 0 && output.length === 0) return null;
  return { input: [...input], output: [...output], maxFeedback: maxFeedback ?? DEFAULT_MAX_GUARDRAIL_FEEDBACK, byName };
}

/** Runs one guardrail's check and checks its verdict; throws `GuardrailError` naming it. */
export async function runGuardrail(guardrail: Guardrail, input: Omit<GuardrailInput, 'signal'>, run: AbortSignal): Promise<GuardrailVerdict> {
  const ms = guardrail.timeoutMs ?? DEFAULT_GUARDRAIL_TIMEOUT_MS;
  let value: unknown;
  try {
    value = await timedCheck(run, ms, (signal) => guardrail.check({ ...input, signal }), () => new GuardrailError(guardrail.name, input.stage, `timed out after ${ms} ms`));
  } catch (error) {
    if (GuardrailError.isInstance(error)) throw error;
    throw new GuardrailError(guardrail.name, input.stage, `threw: ${messageOf(error)}`, { cause: error });
  }
  return checkedGuardVerdict(guardrail.name, input.stage, value);
}

/** A verdict as a guardrail (or an executor replaying one) gave it, checked: plain JSON, a known shape. */
export function checkedGuardVerdict(name: string, stage: GuardrailStage, value: unknown): GuardrailVerdict {
  // readAnswer: a verdict whose fields throw when read (a getter, a Proxy) is no verdict either.
  const parsed = readAnswer(GuardrailVerdictSchema, value);
  if (!parsed.ok) throw new GuardrailError(name, stage, `returned no verdict: ${parsed.problem}`);
  if (parsed.value.type === 'feedback' && stage === 'input') throw new GuardrailError(name, stage, 'returned feedback, but only an output guardrail may');
  const problem = parsed.value.type === 'trip' ? jsonValueProblem(parsed.value.info ?? null, 'info') : null;
  if (problem) throw new GuardrailError(name, stage, `returned a trip whose ${problem}`);
  return parsed.value;
}


/** A check in progress: its key, stage, the verdicts in so far, and the model reply an output check holds. */
export const GuardCheckSchema = z.object({
  key: z.string().min(1),
  stage: z.enum(['input', 'output']),
  verdicts: z.array(z.object({ name: z.string(), verdict: GuardrailVerdictSchema })),
  /** The reply an output check holds until it is decided (plain JSON, as the model call returned it). */
  reply: z.unknown().optional(),
  /** An input check of messages sent while the run went (steering): how many of `GuardState.steered` it judges. */
  steers: z.number().int().positive().optional(),
});
export type GuardCheck = z.infer<typeof GuardCheckSchema>;

/**
 * The driver's guardrail state: the open check, the input check that passed, the run's feedback
 * rounds; and the messages a user sent into the run while it went (`steered`, their texts, not
 * judged yet) with how many such checks the run made (`steerChecks`).
 */
export const GuardStateSchema = z.object({
  check: GuardCheckSchema.nullable(),
  passed: z.string().nullable(),
  feedbacks: z.number().int().nonnegative(),
  steered: z.array(z.string()).optional(),
  steerChecks: z.number().int().nonnegative().optional(),
});
export type GuardState = z.infer<typeof GuardStateSchema>;
export const NO_GUARD: GuardState = Object.freeze({ check: null, passed: null, feedbacks: 0 }) as GuardState;

/** The key of a run's input check (one per run). */
export const inputCheckKey = (context: { sessionId: string; runIndex: number }): string =>
  keyOf({ kind: 'guardCheck', stage: 'input', session: context.sessionId, run: context.runIndex });

/** The input check is due: the agent has input guardrails, the run made no model call yet, and its check has not passed. */
export const inputCheckDue = (plan: GuardrailPlan | null, guard: GuardState | undefined, turnsTaken: number, key: string): boolean =>
  plan !== null && plan.input.length > 0 && turnsTaken === 0 && guard?.passed !== key && !guard?.check;

/** The key of a run's `n`th check of messages sent while it went (its input's check is `inputCheckKey`). */
export const steerCheckKey = (context: { sessionId: string; runIndex: number }, n: number): string => `${inputCheckKey(context)}-steer-${n}`;

/**
 * A check of steering is due: the agent has input guardrails and a user sent messages into the
 * run that no check judged yet. Checked before each model call, so none reads them unjudged.
 */
export const steerCheckDue = (plan: GuardrailPlan | null, guard: GuardState | undefined): boolean =>
  plan !== null && plan.input.length > 0 && !guard?.check && (guard?.steered?.length ?? 0) > 0;

/** A message a user sent while the run went, to be judged before the next model call. */
export const withSteered = (guard: GuardState | undefined, text: string): GuardState => ({ ...(guard ?? NO_GUARD), steered: [...(guard?.steered ?? []), text] });

/**
 * The guardrail state a run starts from: fresh, but for messages a user sent into the previous
 * run that no check judged and that stayed in the conversation (a cancel keeps queued steering):
 * the next model call would read them, so this run's checks judge them too.
 */
export function nextRunGuard(previous: GuardState | undefined, history: readonly Message[]): GuardState {
  const kept = (previous?.steered ?? []).filter((text) => history.some((message) => message.role === 'user' && message.content === text));
  return kept.length > 0 ? { ...NO_GUARD, steered: kept } : NO_GUARD;
}

/** An input check of the steering not judged yet. */
export const openSteerCheck = (guard: GuardState, key: string): GuardState => ({
  ...guard,
  check: { key, stage: 'input', verdicts: [], steers: guard.steered!.length },
});

/** A new check with no verdicts; an output check holds the reply it judges. */
export const openCheck = (guard: GuardState | undefined, key: string, stage: GuardrailStage, reply?: unknown): GuardState => ({
  ...(guard ?? NO_GUARD),
  check: { key, stage, verdicts: [], ...(reply !== undefined && { reply }) },
});

/** One verdict joins the open check (a second verdict from the same guardrail is ignored). */
export function withVerdict(guard: GuardState, name: string, verdict: GuardrailVerdict): GuardState {
  const check = guard.check;
  if (!check || check.verdicts.some((entry) => entry.name === name)) return guard;
  return { ...guard, check: { ...check, verdicts: [...check.verdicts, { name, verdict }] } };
}

/** The guardrails of a check that have no verdict yet. */
export const undecidedGuardrails = (plan: GuardrailPlan, check: GuardCheck): Guardrail[] =>
  plan[check.stage].filter((guardrail) => !check.verdicts.some((entry) => entry.name === guardrail.name));

/** What a check comes to: still open, passed, feedback for the model, or a trip (a feedback past the bound is one). */
export type GuardOutcome =
  | { type: 'open' }
  | { type: 'passed' }
  | { type: 'feedback'; message: string }
  | { type: 'tripped'; guardrail: TrippedGuardrail; message: string };

/**
 * Decides a check: any trip ends it at once (the first to arrive); otherwise it waits for every
 * verdict. Feedback past `maxFeedback` rounds (or when `feedbackLeft` is false: the run's final
 * call has no turn left) is a trip of the first guardrail that gave it.
 */
export function guardOutcome(plan: GuardrailPlan, check: GuardCheck, feedbacks: number, feedbackLeft = true): GuardOutcome {
  const trip = check.verdicts.find((entry) => entry.verdict.type === 'trip');
  if (trip) {
    const info = (trip.verdict as { info?: unknown }).info;
    const guardrail = { name: trip.name, stage: check.stage, ...(info !== undefined && { info }) };
    return { type: 'tripped', guardrail, message: `${check.stage} guardrail '${trip.name}' tripped` };
  }
  if (undecidedGuardrails(plan, check).length > 0) return { type: 'open' };
  const feedback = check.verdicts.flatMap((entry) => (entry.verdict.type === 'feedback' ? [{ name: entry.name, message: entry.verdict.message }] : []));
  if (feedback.length === 0) return { type: 'passed' };
  if (feedbacks >= plan.maxFeedback || !feedbackLeft) {
    const first = feedback[0]!;
    const rounds = feedbackLeft ? `after ${plan.maxFeedback} feedback round${plan.maxFeedback === 1 ? '' : 's'}` : 'with no turn left for another answer';
    return {
      type: 'tripped',
      guardrail: { name: first.name, stage: 'output', info: { feedback: first.message } },
      message: `output guardrail '${first.name}' still refused the answer ${rounds}`,
    };
  }
  return { type: 'feedback', message: feedback.map((entry) => entry.message).join('\n\n') };
}

const FEEDBACK_HEAD = 'Your answer was not accepted:\n';
const FEEDBACK_TAIL = '\nAnswer again.';

/** The user message that sends an output guardrail's feedback to the model. */
export const guardFeedbackMessage = (message: string): UserMessage => ({
  role: 'user',
  content: `${FEEDBACK_HEAD}${message}${FEEDBACK_TAIL}`,
});

/** Whether a stored user message is one `guardFeedbackMessage` wrote (a chat page does not show it as the user's). */
export const isGuardFeedback = (message: UserMessage): boolean => message.content.startsWith(FEEDBACK_HEAD) && message.content.endsWith(FEEDBACK_TAIL);

/** A settled check as the driver keeps it: closed, the input check marked as passed, a feedback round counted. */
export function settledGuard(guard: GuardState, outcome: Exclude<GuardOutcome, { type: 'open' }>): GuardState {
  const check = guard.check!;
  const steering = { ...(guard.steered && { steered: guard.steered }), ...(guard.steerChecks !== undefined && { steerChecks: guard.steerChecks }) };
  // A check of steering: the messages it judged leave the list (one sent meanwhile waits for the next check).
  if (check.steers !== undefined) {
    return { check: null, passed: guard.passed, feedbacks: guard.feedbacks, steered: (guard.steered ?? []).slice(check.steers), steerChecks: (guard.steerChecks ?? 0) + 1 };
  }
  const passed = check.stage === 'input' && outcome.type === 'passed' ? check.key : guard.passed;
  return { check: null, passed, feedbacks: guard.feedbacks + (outcome.type === 'feedback' ? 1 : 0), ...steering };
}

/** A trip as the run's failure: its message, and the guardrail (name, stage, info) that tripped. */
export const trippedFailure = (outcome: Extract<GuardOutcome, { type: 'tripped' }>): Failure & { guardrail: TrippedGuardrail } => ({
  type: 'GuardrailTripped',
  message: outcome.message,
  guardrail: outcome.guardrail,
});

/** The brain a reply leaves would complete the run: the reply output guardrails judge. */
export const completes = (brain: BrainState): boolean => brain.value === 'Terminal' && brain.context.outcome?.type === 'Completed';

/** What an output check judges: the answer's text as the transcript keeps it, and, with an output schema, the parsed answer. */
export function judgedText(structured: StructuredOutput | undefined, answer: AnswerStep): { text: string; output?: unknown } {
  const text = answer.reply.message.content;
  const checked = structured && checkAnswer(structured, { text });
  return checked?.ok ? { text, output: checked.value } : { text };
}
