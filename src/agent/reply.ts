import { z } from 'zod';
import { ModelError, type ModelReply, type Usage } from '../model.js';
import { AssistantMessageSchema, FinishReasonSchema } from '../schemas.js';

/**
 * The boundary where a model's reply enters the driver. Any `Model` may answer anything, so
 * the reply is checked here, once, whatever adapter or executor produced it (a journaled one
 * included): a reply that is not one fails the turn with a `ModelError` that says what is
 * wrong, and provider numbers are made to fit what the driver stores.
 */

/** Deepest nesting accepted in a tool call's arguments; deeper is refused, not recursed into. */
export const MAX_ARGS_DEPTH = 64;

/**
 * A provider's token count as the driver keeps it: a non-negative safe integer. Fractions are
 * rounded; negative, non-finite or absurd counts (above 2^53) are not counts, so the usage is
 * dropped and the driver estimates instead.
 */
function tokenCount(value: unknown): number | undefined {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) return undefined;
  const rounded = Math.round(value);
  return Number.isSafeInteger(rounded) ? rounded : undefined;
}

function normalizeUsage(raw: unknown): Usage | undefined {
  if (raw === undefined || raw === null || typeof raw !== 'object') return undefined;
  const { inputTokens, outputTokens } = raw as Record<string, unknown>;
  const input = tokenCount(inputTokens);
  const output = tokenCount(outputTokens);
  return input === undefined || output === undefined ? undefined : { inputTokens: input, outputTokens: output };
}

/** Why a value is not plain JSON data within the depth limit, or null when it is. */
export function plainJsonProblem(value: unknown, path = 'args', depth = 0): string | null {
  if (depth > MAX_ARGS_DEPTH) return `${path} is nested more than ${MAX_ARGS_DEPTH} levels deep`;
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return null;
    case 'number':
      return Number.isFinite(value) ? null : `${path} is ${value}, not a JSON number`;
    case 'object': {
      if (value === null) return null;
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          const problem = plainJsonProblem(value[i], `${path}[${i}]`, depth + 1);
          if (problem) return problem;
        }
        return null;
      }
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) return `${path} is not a plain object`;
      for (const [key, item] of Object.entries(value)) {
        const problem = plainJsonProblem(item, `${path}.${key}`, depth + 1);
        if (problem) return problem;
      }
      return null;
    }
    default:
      return `${path} is a ${typeof value}, not JSON data`;
  }
}

const ReplyShape = z.object({
  message: AssistantMessageSchema,
  finishReason: z.unknown().optional(),
  usage: z.unknown().optional(),
});

/**
 * Checks a reply that came from a `Model` (or an executor replaying one) and returns it in the
 * shape the driver stores: a known finish reason (`other` for anything else) and usage with
 * sane counts, or none. Throws a non-retryable `ModelError` naming what is wrong.
 */
export function parseReply(raw: unknown): ModelReply {
  const parsed = ReplyShape.safeParse(raw);
  if (!parsed.success) {
    throw new ModelError(`the model's reply is malformed: ${z.prettifyError(parsed.error)}`, { retryable: false });
  }
  const { message } = parsed.data;
  for (const [index, call] of (message.toolCalls ?? []).entries()) {
    const problem = plainJsonProblem(call.args, `toolCalls[${index}].args`);
    if (problem) throw new ModelError(`the model's reply is malformed: ${problem}`, { retryable: false });
  }
  const finishReason = FinishReasonSchema.safeParse(parsed.data.finishReason);
  const usage = normalizeUsage(parsed.data.usage);
  return {
    message,
    finishReason: finishReason.success ? finishReason.data : 'other',
    ...(usage && { usage }),
  };
}
