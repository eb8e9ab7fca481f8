import { z } from 'zod';
import { readsResponseFormat, type Model, type ModelReply, type ResponseFormat, type ToolDefinition } from '../../model.js';
import { StructuredOutputError, type OutputIssue } from '../../errors.js';
import type { Policy, UserMessage } from '../../schemas.js';
import { estimateTokens } from '../../tokens.js';
import { defineTool, type Tool } from '../../tools/define-tool.js';
import { jsonSchemaValidator, type JsonSchema } from '../../tools/json-schema.js';
import { decide } from '../../../machines/loop.machine.js';
import { feedBrain, type BrainState } from '../core/brain-state.js';
import type { AgentOutcome } from '../protocol/failure.js';
import type { AnswerRules, AnswerStep as JudgedReply } from '../core/answer.js';
import { InvalidConfigError } from '../../errors.js';

/**
 * Structured final output (issue 21): the rules that make a run complete only with an answer
 * its `output` schema accepts. Pure functions of the compiled schema and the run's state; the
 * chart calls them from one-line guards and actions.
 *
 * How the answer travels: a model that reads the response format (`supports.responseFormat`) is
 * asked for JSON through the provider's JSON-schema mode; any other model is offered a
 * `final_answer` tool whose arguments are the answer. Either way the answer is validated here,
 * and the transcript keeps it as the final assistant message's text (its JSON).
 */

/** A zod 4 schema or a JSON Schema object whose root is an object. */
export type OutputSchema = z.ZodType | JsonSchema;

/** The answer's type for a given `output`: a zod schema's output type; unknown for a JSON Schema (and without one). */
export type OutputOf<S> = S extends z.ZodType ? z.output<S> : unknown;

/** The tool a model without a JSON-schema mode answers through (and the response format's name). */
export const FINAL_ANSWER_TOOL = 'final_answer';

/** Invalid answers sent back to the model before the run fails, by default. */
export const DEFAULT_OUTPUT_RETRIES = 2;

/** Most answers a run may send back: each is a model call. */
const MAX_OUTPUT_RETRIES = 10;

/** Issues quoted back to the model (and kept on the error) per answer. */
const MAX_ISSUES = 5;

/** The agent's output schema, checked and compiled once per machine. */
export interface StructuredOutput {
  /** `json`: the provider's JSON-schema mode; `tool`: the `final_answer` tool. */
  mode: 'json' | 'tool';
  validator: z.ZodType;
  /** What the model sees: the schema's input side, without `$schema`. */
  jsonSchema: JsonSchema;
  retries: number;
  /** One last call for the answer when `maxTurns` or a budget would end the run. */
  finalCall: boolean;
  /** Set in `json` mode: sent with every model call. */
  responseFormat: ResponseFormat | undefined;
  /** Set in `tool` mode: offered with the agent's tools. */
  tool: Tool | undefined;
}

/** The part of `AgentConfig` this module reads. */
export interface OutputConfig {
  output?: unknown;
  outputRetries?: number | undefined;
  finalOutputCall?: boolean | undefined;
}

/**
 * The compiled output settings, or undefined without `output`. Throws `InvalidConfigError` for a
 * schema that cannot be enforced: not zod 4 nor a JSON Schema object, a root that is not an
 * object (providers take neither a tool's arguments nor a JSON-schema answer otherwise), a zod
 * schema without a JSON Schema form on either side (a transform, a Date: the answer is stored
 * as JSON), a JSON Schema the validator cannot express.
 */
export function compileOutput(config: OutputConfig, models: readonly Model[]): StructuredOutput | undefined {
  if (config.output === undefined) {
    if (config.outputRetries !== undefined || config.finalOutputCall !== undefined) throw new InvalidConfigError('outputRetries and finalOutputCall need an output schema');
    return undefined;
  }
  const retries = config.outputRetries ?? DEFAULT_OUTPUT_RETRIES;
  if (!Number.isInteger(retries) || retries < 0 || retries > MAX_OUTPUT_RETRIES) {
    throw new InvalidConfigError(`outputRetries must be an integer from 0 to ${MAX_OUTPUT_RETRIES}, got ${String(retries)}`);
  }
  if (config.finalOutputCall !== undefined && typeof config.finalOutputCall !== 'boolean') throw new InvalidConfigError('finalOutputCall must be a boolean');
  const { validator, jsonSchema } = outputValidator(config.output);
  // A list of models (fallback, and the handoff agents' own) uses the provider's JSON mode only when every one of them reads it.
  const mode = models.every(readsResponseFormat) ? 'json' : 'tool';
  const description = typeof jsonSchema.description === 'string' ? jsonSchema.description : undefined;
  return {
    mode,
    validator,
    jsonSchema,
    retries,
    finalCall: config.finalOutputCall ?? true,
    responseFormat: mode === 'json' ? { type: 'json', name: FINAL_ANSWER_TOOL, ...(description && { description }), schema: jsonSchema } : undefined,
    tool: mode === 'tool' ? finalAnswerTool(jsonSchema) : undefined,
  };
}

function outputValidator(output: unknown): { validator: z.ZodType; jsonSchema: JsonSchema } {
  if (typeof output !== 'object' || output === null || Array.isArray(output)) {
    throw new InvalidConfigError('output must be a zod 4 schema or a JSON Schema object');
  }
  if ('_zod' in output) return zodOutput(output as z.ZodType);
  if ('_def' in output) throw new InvalidConfigError("output is a zod 3 schema; loopchart needs zod 4 (import { z } from 'zod' with zod 4, or 'zod/v4' with zod 3.25)");
  const converted = jsonSchemaValidator(output);
  if ('problem' in converted) throw new InvalidConfigError(`output: ${converted.problem.replace(/^its input schema/, 'the schema').replaceAll('inputSchema', 'output')}`);
  const { $schema: _dialect, ...jsonSchema } = output as JsonSchema;
  return { validator: converted.validator, jsonSchema };
}

function zodOutput(schema: z.ZodType): { validator: z.ZodType; jsonSchema: JsonSchema } {
  let jsonSchema: JsonSchema;
  try {
    // The model writes what the schema parses (its input side); the parsed value must be JSON too,
    // as a durable session stores it: a schema without an output-side form (a transform, a Date) is refused.
    jsonSchema = { ...z.toJSONSchema(schema, { io: 'input' }) };
    z.toJSONSchema(schema, { io: 'output' });
  } catch (error) {
    throw new InvalidConfigError(`output has no JSON Schema form (${(error as Error).message}): the answer is JSON, so use a schema without transforms or Dates and convert the output yourself`);
  }
  if (jsonSchema.type !== 'object') throw new InvalidConfigError('output must describe an object (z.object(...)): providers take a JSON-schema answer or tool arguments only as an object');
  delete jsonSchema.$schema;
  return { validator: schema, jsonSchema };
}

/** The tool a model without a JSON-schema mode gives its answer through. Run only when called beside other tools. */
function finalAnswerTool(jsonSchema: JsonSchema): Tool {
  return defineTool({
    name: FINAL_ANSWER_TOOL,
    description: 'Gives your final answer; its arguments are the answer. Call it alone, once you have everything you need.',
    inputSchema: jsonSchema,
    execute: () => {
      throw new Error(`not accepted: call ${FINAL_ANSWER_TOOL} alone, once your other tool calls have returned`);
    },
  });
}

/** `(root)`, `items[0].price`: where an issue sits, as the model and the error show it. */
export function issuePath(path: readonly PropertyKey[]): string {
  if (path.length === 0) return '(root)';
  return path.map((key, i) => (typeof key === 'number' ? `[${key}]` : `${i === 0 ? '' : '.'}${String(key)}`)).join('');
}

/** A model's JSON answer: the text itself, or inside one Markdown code fence (some models add one). */
function jsonText(text: string): string {
  const fenced = /^\s*```(?:json)?\s*\n([\s\S]*?)\n?```\s*$/.exec(text);
  return fenced ? fenced[1]! : text;
}

/** The validated answer for a candidate (a JSON text, or a final_answer call's arguments), or its issues. */
export function checkAnswer(structured: StructuredOutput, candidate: { text: string } | { args: unknown }): { ok: true; value: unknown } | { ok: false; issues: OutputIssue[] } {
  let value: unknown;
  if ('args' in candidate) value = candidate.args;
  else {
    try {
      value = JSON.parse(jsonText(candidate.text));
    } catch (error) {
      const what = candidate.text.trim() === '' ? 'the answer is empty' : `the answer is not JSON (${(error as Error).message})`;
      const hint = structured.mode === 'tool' ? `: call ${FINAL_ANSWER_TOOL} with the answer` : '';
      return { ok: false, issues: [{ path: '(root)', message: what + hint }] };
    }
  }
  const parsed = structured.validator.safeParse(value);
  if (parsed.success) return { ok: true, value: parsed.data };
  return { ok: false, issues: parsed.error.issues.slice(0, MAX_ISSUES).map((issue) => ({ path: issuePath(issue.path), message: issue.message })) };
}

/** What a run keeps about its answers: how many went back, and the final call once it began. */
export const OutputStateSchema = z.object({
  rejected: z.number().int().nonnegative(),
  /** The outcome the run had reached, and the turn it had taken, when its final call began. */
  finalCall: z
    .object({
      turn: z.number().int().nonnegative(),
      outcome: z.discriminatedUnion('type', [z.object({ type: z.literal('MaxTurnsExceeded') }), z.object({ type: z.literal('Sealed'), reason: z.string() })]),
    })
    .nullable(),
});
export type OutputState = z.infer<typeof OutputStateSchema>;
/** How a run would have ended had its final call not been made. */
export type FinalCallOutcome = NonNullable<OutputState['finalCall']>['outcome'];
export const FRESH_OUTPUT_STATE: OutputState = Object.freeze({ rejected: 0, finalCall: null }) as OutputState;

/** What a model reply does to the run, decided before the brain sees it (see `judgeAnswer`). */
export type AnswerStep = JudgedReply<OutputState>;

/** The reply as text only; an answer given through the tool ended the turn as a natural stop does. */
const textReply = (reply: ModelReply, content: string): ModelReply => ({
  ...reply,
  message: { role: 'assistant', content },
  finishReason: reply.finishReason === 'tool-calls' ? 'stop' : reply.finishReason,
});

/**
 * Judges a model reply against the output schema. A reply that asks for other tools goes on as
 * is; an answer (JSON text, or a lone final_answer call) that validates is kept as the final
 * text; one that does not goes back to the model with its issues while attempts are left, then
 * fails the run `Failed(StructuredOutputError)`. The final call's reply ends the run either
 * way: with the answer, or with the outcome the run had reached.
 */
export function judgeAnswer(structured: StructuredOutput | undefined, brain: BrainState, state: OutputState | undefined, reply: ModelReply): AnswerStep {
  const same: AnswerStep = { brain, reply, state };
  if (!structured) return same;
  const current = state ?? FRESH_OUTPUT_STATE;
  const calls = reply.message.toolCalls ?? [];
  const finalCall = current.finalCall;
  // The answer's tool counts called alone, or at all in the final call (whose other calls never run).
  const answerCall =
    structured.mode !== 'tool' ? undefined : finalCall ? calls.find((call) => call.name === FINAL_ANSWER_TOOL) : calls.length === 1 && calls[0]!.name === FINAL_ANSWER_TOOL ? calls[0] : undefined;
  // Outside the final call, other tool calls (or steering, which keeps the run going) mean no answer yet.
  if (!finalCall && ((calls.length > 0 && !answerCall) || brain.context.steering.length > 0)) return same;
  const checked = checkAnswer(structured, answerCall ? { args: answerCall.args } : { text: reply.message.content });
  if (checked.ok) {
    const answered = answerCall ? textReply(reply, JSON.stringify(answerCall.args)) : textReply(reply, reply.message.content);
    // The final call's valid answer ends the run even with a steer queued meanwhile (it would
    // otherwise keep the run going past its last turn, the answer lost): the steer stays in the conversation.
    if (finalCall && brain.context.steering.length > 0) return { brain, state: current, reply: answered, overrule: { type: 'Completed', finalText: answered.message.content } };
    return { brain, state: current, reply: answered };
  }
  const attempts = current.rejected + 1;
  const rejected = new StructuredOutputError(checked.issues, attempts);
  // What the model answered stays in the transcript as text, its tool calls gone (none ran).
  const kept = textReply(reply, answerCall ? JSON.stringify(answerCall.args) : reply.message.content);
  if (finalCall) return { brain, state: current, reply: kept, overrule: finalCall.outcome, rejected };
  if (current.rejected >= structured.retries) {
    return { brain, state: { ...current, rejected: attempts }, reply: kept, overrule: { type: 'Failed', error: { type: 'StructuredOutputError', message: rejected.message } }, rejected };
  }
  const steered = feedBrain(brain, { type: 'steer', message: feedbackMessage(structured, checked.issues) });
  return { brain: steered, state: { ...current, rejected: attempts }, reply: kept, rejected };
}

const FEEDBACK_HEAD = 'Your answer does not match the required output schema:\n';
/** How each mode asks for the answer again (the last line of the feedback). */
const ASK_AGAIN = { tool: `\nCall ${FINAL_ANSWER_TOOL} again with the corrected answer.`, json: '\nReply again with only the corrected answer, as JSON.' } as const;

/** The user message that sends an invalid answer back: where and why, and how to answer again. */
export function feedbackMessage(structured: StructuredOutput, issues: readonly OutputIssue[]): UserMessage {
  const list = issues.map((issue) => `- at ${issue.path}: ${issue.message}`).join('\n');
  return { role: 'user', content: `${FEEDBACK_HEAD}${list}${structured.mode === 'tool' ? ASK_AGAIN.tool : ASK_AGAIN.json}` };
}

/** Whether a stored user message is one `feedbackMessage` wrote (a chat page does not show it as the user's). */
export const isOutputFeedback = (message: UserMessage): boolean =>
  message.content.startsWith(FEEDBACK_HEAD) && (message.content.endsWith(ASK_AGAIN.tool) || message.content.endsWith(ASK_AGAIN.json));

/** The brain once the reply is in, with the answer's verdict applied (a run that already failed keeps its failure). */
export function settleAnswer(step: AnswerStep, brain: BrainState): BrainState {
  if (!step.overrule || brain.context.outcome?.type === 'Failed') return brain;
  return { value: 'Terminal', context: { ...brain.context, outcome: step.overrule } };
}

/**
 * The outcome a final call would rescue, or null: the run is about to end by `maxTurns` (the
 * brain's next decision) or a budget (`overBudget`, the seal reason), the agent has an output
 * schema with `finalOutputCall` on, and the run has not made its final call yet.
 */
export function finalCallReason(
  structured: StructuredOutput | undefined,
  state: OutputState | undefined,
  brain: BrainState,
  policy: Policy,
  overBudget: string | null,
): FinalCallOutcome | null {
  if (!structured?.finalCall || state?.finalCall || brain.value !== 'Start' || brain.context.cancelled) return null;
  if (overBudget !== null) return { type: 'Sealed', reason: overBudget };
  return decide(brain.value, brain.context, policy).action === 'concludeMaxTurns' ? { type: 'MaxTurnsExceeded' } : null;
}

/** How each mode asks for the answer in the final call's request. */
const FINAL_HOW = { tool: `by calling ${FINAL_ANSWER_TOOL}`, json: 'as JSON matching the required schema' } as const;

/**
 * The user message that asks for the answer in the final call: why the run is ending, and how to
 * answer in the mode the agent uses.
 *
 * @example
 * ```ts
 * console.log(finalCallRequest('tool', { type: 'MaxTurnsExceeded' }).content); // This run has reached the turn limit. Do not call any other tools: ...
 * ```
 */
export function finalCallRequest(mode: StructuredOutput['mode'], outcome: FinalCallOutcome): UserMessage {
  const why = outcome.type === 'MaxTurnsExceeded' ? 'the turn limit' : `its budget (${outcome.reason})`;
  return { role: 'user', content: `This run has reached ${why}. Do not call any other tools: give your final answer now, ${FINAL_HOW[mode]}, with what you have.` };
}

// Neither way of answering holds a character a regular expression reads specially.
const FINAL_REQUEST = new RegExp(
  `^This run has reached (?:the turn limit|its budget \\(([\\s\\S]*)\\))\\. Do not call any other tools: give your final answer now, (${FINAL_HOW.tool}|${FINAL_HOW.json}), with what you have\\.$`,
);

/**
 * What a stored user message that `finalCallRequest` wrote asked for (its mode, and the outcome
 * the run had reached), or null for any other message: replay reads a final call off the
 * recorded prompt this way, the trace having no entry of its own for it.
 *
 * @example
 * ```ts
 * console.log(finalCallOf(finalCallRequest('json', { type: 'Sealed', reason: 'maxTokens' }))); // { mode: 'json', outcome: { type: 'Sealed', reason: 'maxTokens' } }
 * ```
 */
export function finalCallOf(message: UserMessage): { mode: StructuredOutput['mode']; outcome: FinalCallOutcome } | null {
  const match = FINAL_REQUEST.exec(message.content);
  if (!match) return null;
  const mode = match[2] === FINAL_HOW.tool ? 'tool' : 'json';
  const outcome: FinalCallOutcome = match[1] === undefined ? { type: 'MaxTurnsExceeded' } : { type: 'Sealed', reason: match[1] };
  // Written back, it must be the very text (a reason holding the sentence's own words parses one way only).
  return finalCallRequest(mode, outcome).content === message.content ? { mode, outcome } : null;
}

/** The final call begins: the request for the answer joins the conversation, counted in the estimate. */
export function beginFinalCall(
  structured: StructuredOutput,
  brain: BrainState,
  state: OutputState | undefined,
  outcome: FinalCallOutcome,
): { brain: BrainState; outputState: OutputState } {
  const message = finalCallRequest(structured.mode, outcome);
  const injected = feedBrain(brain, { type: 'inject', message });
  return {
    brain: feedBrain(injected, { type: 'setContextTokens', tokens: brain.context.contextTokens + estimateTokens([message]) }),
    outputState: { ...(state ?? FRESH_OUTPUT_STATE), finalCall: { turn: brain.context.turnsTaken, outcome } },
  };
}

/** The policy the brain decides with during the final call: one turn past the one the run had reached. */
export const finalCallPolicy = (policy: Policy, state: OutputState | undefined): Policy =>
  state?.finalCall ? { ...policy, maxTurns: Math.max(policy.maxTurns, state.finalCall.turn + 1) } : policy;

/** The tools the final call offers: only the answer's tool (tool mode), none with a JSON-schema mode. */
export function finalCallTools(structured: StructuredOutput): { definitions: readonly ToolDefinition[]; names: readonly string[] } {
  return structured.tool ? { definitions: [structured.tool.definition], names: [FINAL_ANSWER_TOOL] } : { definitions: [], names: [] };
}

/**
 * A finished run's outcome with its answer: a `Completed` run's final text is the answer that
 * validated (`judgeAnswer` saw to it), parsed again into `output`.
 */
export function withOutput(structured: StructuredOutput | undefined, outcome: AgentOutcome): AgentOutcome {
  if (!structured || outcome.type !== 'Completed') return outcome;
  const checked = checkAnswer(structured, { text: outcome.finalText });
  if (checked.ok) return { ...outcome, output: checked.value };
  return { type: 'Failed', error: { type: 'StructuredOutputError', message: new StructuredOutputError(checked.issues, 1).message } };
}

/**
 * The answers' rules an agent with an output schema runs by (see `AnswerRules`): its replies
 * judged, a final call's outcome settled, its policy and its output. `compile` gives them to the
 * agent; an agent without an output schema has none.
 *
 * @example
 * ```ts
 * const rules = answerRules(compileOutput({ output: z.object({ city: z.string() }) }, [model])!);
 * console.log(rules.outcome({ type: 'Completed', finalText: '{"city":"Lyon"}' })); // { type: 'Completed', finalText: '{"city":"Lyon"}', output: { city: 'Lyon' } }
 * ```
 */
export const answerRules = (structured: StructuredOutput): AnswerRules<OutputState> => ({
  judge: (brain, state, reply) => judgeAnswer(structured, brain, state, reply),
  settle: settleAnswer,
  policy: finalCallPolicy,
  outcome: (outcome) => withOutput(structured, outcome),
});
