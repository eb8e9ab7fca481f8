import { z } from 'zod';
import { EvalOptionsError } from './errors.js';
import { MAX_TIMER_MS } from '../timer-bound.js';

/*
 * The plain-data options of `runCase` and `runEval`, checked once at the entry: a value out of
 * range (NaN from a flag that did not parse, say) is an `EvalOptionsError` naming the option,
 * never a TypeError from deep in the run or a timer that fires at once.
 */


const ms = z.number().positive().max(MAX_TIMER_MS);
const unit = z.number().min(0).max(1);

/** What `runCase` checks of its options (functions and stores are taken as given). */
export const RunCaseOptionsSchema = z.looseObject({
  model: z.enum(['live', 'recorded']).optional(),
  liveTools: z.array(z.string()).optional(),
  timeoutMs: ms.optional(),
  allowMissingTools: z.boolean().optional(),
  sessionId: z.string().min(1).optional(),
});

/** What `runEval` checks of its options: `runCase`'s, and its own. */
export const RunEvalOptionsSchema = RunCaseOptionsSchema.extend({
  dataset: z.union([z.string().min(1), z.looseObject({ cases: z.array(z.unknown()), problems: z.array(z.unknown()) })]),
  agent: z.custom<unknown>((value) => typeof value === 'function' || (typeof value === 'object' && value !== null), 'an AgentConfig or a function giving one per case'),
  scorers: z.array(z.looseObject({ name: z.string().min(1), passAt: unit.optional(), threshold: unit.optional(), timeoutMs: ms.optional(), score: z.custom<unknown>((v) => typeof v === 'function', 'a function') })).optional(),
  concurrency: z.number().int().min(1).optional(),
  resultsFile: z.string().min(1).optional(),
  onUnreadable: z.custom<unknown>((value) => typeof value === 'function', 'a function').optional(),
  maxFailedCases: z.number().int().nonnegative().optional(),
  runId: z.string().regex(/^[A-Za-z0-9._-]+$/, 'letters, digits, ".", "_" or "-"').optional(),
});

/** The options as given, or an `EvalOptionsError` naming the first one out of range. */
export function checkOptions<T>(entry: 'runEval' | 'runCase', schema: z.ZodType, options: T): T {
  const parsed = schema.safeParse(options);
  if (parsed.success) return options;
  const issue = parsed.error.issues[0]!;
  const option = issue.path.map((part) => (typeof part === 'number' ? `[${part}]` : `.${String(part)}`)).join('').replace(/^\./, '') || '(options)';
  const more = parsed.error.issues.length > 1 ? ` (and ${parsed.error.issues.length - 1} more)` : '';
  throw new EvalOptionsError(entry, option, `${issue.message}, got ${describe(valueAt(options, issue.path))}${more}`);
}

function valueAt(value: unknown, path: readonly PropertyKey[]): unknown {
  return path.reduce<unknown>((at, part) => (at !== null && typeof at === 'object' ? (at as Record<PropertyKey, unknown>)[part] : undefined), value);
}

const describe = (value: unknown): string => (typeof value === 'number' || value === undefined ? String(value) : typeof value === 'function' ? 'a function' : (JSON.stringify(value) ?? String(value)).slice(0, 60));
