import { z } from 'zod';
import { LoopchartError } from '../errors.js';
import { kindOf, parseOptions } from '../known-keys.js';
import {
  argumentsProblem,
  MAX_REPORTED_TOKENS,
  ModelError,
  type FinishReason,
  type Model,
  type ModelReply,
  type ModelRequest,
} from '../model.js';
import type { AssistantMessage, Message, ToolCall } from '../schemas.js';
import { estimateMessageTokens, estimateTokens } from '../tokens.js';
import { abortError } from './errors.js';
import { isRetryableStatus } from './http-status.js';
import { sleep } from './sleep.js';

const FINISH_REASONS = ['stop', 'length', 'content-filter', 'tool-calls', 'cancelled', 'other'] as const satisfies readonly FinishReason[];

const delayMs = z.number().nonnegative().optional();
/**
 * A script is the author's own data, so a usage outside what `normalizeUsage` keeps (fractional,
 * negative, above MAX_REPORTED_TOKENS) is refused loudly rather than rounded or dropped.
 */
const scriptedTokens = z.number().int().nonnegative().max(MAX_REPORTED_TOKENS);
const scriptedArgs = z.unknown().superRefine((args, ctx) => {
  const problem = args === undefined ? null : argumentsProblem(args);
  if (problem !== null) ctx.addIssue({ code: 'custom', message: problem });
});

/** One model reply. Strict, so a misspelt key (`toolcalls`) is an error rather than a silent text reply. */
export const ScriptedReplySchema = z.strictObject({
  text: z.string().optional(),
  toolCalls: z
    .array(z.strictObject({ name: z.string().min(1), args: scriptedArgs, id: z.string().min(1).optional() }))
    .optional(),
  /** Default: `tool-calls` when there are tool calls, else `stop`. */
  finishReason: z.enum(FINISH_REASONS).optional(),
  /** Default: estimated with the tokenizer. */
  usage: z.strictObject({ inputTokens: scriptedTokens, outputTokens: scriptedTokens }).optional(),
  /** Time the reply takes, spread over its text chunks: room to cancel during a model call. */
  delayMs,
});
export type ScriptedReply = z.input<typeof ScriptedReplySchema>;

/**
 * A failed call. A plain spec becomes a ModelError (retryable by default for 408, 429 and 5xx, as
 * the HTTP adapters decide); an Error instance (say `new TypeError('fetch failed')`) is thrown as is.
 */
export const ScriptedFailureSchema = z.strictObject({
  error: z.union([
    z.instanceof(Error),
    z.strictObject({
      message: z.string(),
      status: z.number().int().optional(),
      retryable: z.boolean().optional(),
      retryAfterMs: z.number().nonnegative().optional(),
    }),
  ]),
  delayMs,
});
export type ScriptedFailure = z.input<typeof ScriptedFailureSchema>;

const ScriptedOutcomeSchema = z.union([ScriptedFailureSchema, ScriptedReplySchema]);
type ScriptedOutcome = z.output<typeof ScriptedOutcomeSchema>;

/** Computes the reply from the request, e.g. an answer from the tool results in the conversation. */
export type ScriptedFunction = (request: ModelRequest) => ScriptedReply | ScriptedFailure | Promise<ScriptedReply | ScriptedFailure>;
export type ScriptEntry = ScriptedReply | ScriptedFailure | ScriptedFunction;

export interface ScriptedModelOptions {
  /** Default `scripted`. */
  name?: string | undefined;
  /** Default delay for entries that set none. */
  delayMs?: number | undefined;
}

/** A script entry (or what a script function returned) that is not a reply or failure spec. */
export class InvalidScriptError extends LoopchartError {
  constructor(where: string, problem: string) {
    super('InvalidScript', `${where}: ${problem}`);
  }
}

/** The conversation reached a turn the script has no reply for. Not retryable: asking again cannot help. */
export class ScriptExhaustedError extends ModelError {
  readonly turn: number;
  constructor(modelName: string, turn: number, scriptedTurns: number) {
    super(
      `scripted model "${modelName}" has no reply for turn ${turn}: the script answers ${scriptedTurns} turn(s)`,
      { retryable: false },
    );
    this.turn = turn;
  }
}

/** A turn's answer, preceded by the failures to serve before it. */
interface ScriptedTurn {
  failures: ScriptedOutcome[];
  answer: ScriptedOutcome | ScriptedFunction | undefined;
}

/**
 * A deterministic, offline model.
 *
 * Which entry answers: the number of assistant messages already in `request.messages` picks the
 * turn (0 assistant messages → the first reply entry). The model keeps no cursor for replies, so a
 * process restored from a snapshot, or a call repeated after a crash, gets the same reply as the
 * original run. Consequence: a compaction that drops assistant messages moves the script back; a
 * script meant to run through compaction should answer with functions of the request.
 *
 * Failure entries belong to the reply entry after them and are served once each, in order, per
 * model instance: `[{ error: 429 }, { error: 429 }, reply]` fails twice and then answers the same
 * turn, which is how a retry sees it. A fresh instance (a restored process) serves them again.
 *
 * Tool call ids default to `call_<turn>_<i>` (turn from 1, i from 0 within the reply). Text is
 * streamed through `onTextDelta` in up to four chunks. An aborted signal rejects with an AbortError.
 *
 * @example
 * ```ts
 * import { scriptedModel } from 'loopchart/testing';
 *
 * const model = scriptedModel([
 *   { toolCalls: [{ name: 'add', args: { a: 1, b: 2 } }] }, // turn 1 asks for a tool
 *   { text: 'It is 3.' },                                   // turn 2 answers
 * ]);
 * ```
 */
export function scriptedModel(script: readonly ScriptEntry[], options: ScriptedModelOptions = {}): Model {
  const name = options.name ?? 'scripted';
  const turns = toTurns(script);
  const failuresServed = new Map<number, number>();

  return {
    name,
    async generate(request: ModelRequest): Promise<ModelReply> {
      if (request.signal.aborted) throw abortError(request.signal);
      const turnIndex = countAssistantMessages(request.messages);
      const turn = turns[turnIndex];
      const served = failuresServed.get(turnIndex) ?? 0;
      let outcome: ScriptedOutcome;
      if (turn && served < turn.failures.length) {
        failuresServed.set(turnIndex, served + 1);
        outcome = turn.failures[served]!;
      } else if (turn?.answer === undefined) {
        throw new ScriptExhaustedError(name, turnIndex + 1, turns.filter((t) => t.answer !== undefined).length);
      } else if (typeof turn.answer === 'function') {
        outcome = parseOutcome(await turn.answer(request), `script function for turn ${turnIndex + 1}`);
      } else {
        outcome = turn.answer;
      }

      // A script function may have awaited something while the run was cancelled.
      if (request.signal.aborted) throw abortError(request.signal);
      const delay = outcome.delayMs ?? options.delayMs ?? 0;
      if ('error' in outcome) {
        if (delay > 0) await sleep(delay, request.signal);
        throw toError(outcome.error);
      }
      const message = assistantMessage(outcome, turnIndex + 1);
      await streamText(message.content, delay, request);
      return {
        message,
        finishReason: outcome.finishReason ?? (message.toolCalls ? 'tool-calls' : 'stop'),
        usage: outcome.usage ?? {
          inputTokens: estimateTokens(request.messages, request.tools),
          outputTokens: estimateMessageTokens(message),
        },
      };
    },
  };
}

function toTurns(script: readonly ScriptEntry[]): ScriptedTurn[] {
  const turns: ScriptedTurn[] = [];
  let failures: ScriptedOutcome[] = [];
  script.forEach((entry, index) => {
    const parsed = typeof entry === 'function' ? entry : parseOutcome(entry, `script entry ${index}`);
    if (typeof parsed !== 'function' && 'error' in parsed) {
      failures.push(parsed);
      return;
    }
    turns.push({ failures, answer: parsed });
    failures = [];
  });
  // Failures after the last reply: served, then the script is exhausted.
  if (failures.length > 0) turns.push({ failures, answer: undefined });
  return turns;
}

const REPLY_KEYS = Object.keys(ScriptedReplySchema.shape).join(', ');
const FAILURE_KEYS = Object.keys(ScriptedFailureSchema.shape).join(', ');

/**
 * A script entry checked as a reply or, when it has an `error` key, as a failure: each schema
 * alone, so the refusal is one line naming what is wrong inside it (a misspelt key with the
 * closest one), where the union of the two said only "Invalid input".
 */
function parseOutcome(value: unknown, where: string): ScriptedOutcome {
  const refuse = (message: string) => new InvalidScriptError(where, message);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw refuse(`expected a reply ({ ${REPLY_KEYS} }), a failure ({ ${FAILURE_KEYS} }) or a function of the request, got ${kindOf(value)}`);
  }
  return 'error' in value ? parseOptions(ScriptedFailureSchema, value, '', refuse) : parseOptions(ScriptedReplySchema, value, '', refuse);
}

function countAssistantMessages(messages: readonly Message[]): number {
  let count = 0;
  for (const message of messages) if (message.role === 'assistant') count++;
  return count;
}

function toError(spec: Extract<ScriptedOutcome, { error: unknown }>['error']): Error {
  if (spec instanceof Error) return spec;
  return new ModelError(spec.message, {
    status: spec.status,
    retryable: spec.retryable ?? (spec.status !== undefined && isRetryableStatus(spec.status)),
    retryAfterMs: spec.retryAfterMs,
  });
}

function assistantMessage(reply: Exclude<ScriptedOutcome, { error: unknown }>, turn: number): AssistantMessage {
  const message: AssistantMessage = { role: 'assistant', content: reply.text ?? '' };
  if (reply.toolCalls && reply.toolCalls.length > 0) {
    message.toolCalls = reply.toolCalls.map(
      // No arguments means an empty object, as providers send for a parameterless tool: `undefined`
      // has no JSON form and would not survive a snapshot.
      (call, i): ToolCall => ({ id: call.id ?? `call_${turn}_${i}`, name: call.name, args: call.args ?? {} }),
    );
  }
  return message;
}

const MAX_CHUNKS = 4;
const MIN_CHUNK = 8;

/** Deterministic chunks, split on code points so no emoji is cut in half; the delay is spread over them. */
async function streamText(text: string, delayMs: number, request: ModelRequest): Promise<void> {
  const points = Array.from(text);
  const size = Math.max(MIN_CHUNK, Math.ceil(points.length / MAX_CHUNKS));
  const chunks: string[] = [];
  for (let i = 0; i < points.length; i += size) chunks.push(points.slice(i, i + size).join(''));
  if (chunks.length === 0) {
    if (delayMs > 0) await sleep(delayMs, request.signal);
    return;
  }
  for (const chunk of chunks) {
    if (delayMs > 0) await sleep(delayMs / chunks.length, request.signal);
    request.onTextDelta?.(chunk);
  }
}
