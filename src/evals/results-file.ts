import { readFile, writeFile } from 'node:fs/promises';
import { z } from 'zod';
import { AgentOutcomeSchema } from '../agent/protocol/failure.js';
import { jsonValueProblem } from '../json-value.js';
import { MessageSchema, UsageSchema } from '../schemas.js';
import { CASE_ID, MAX_CASE_DEPTH, nestsDeeperThan } from './dataset.js';
import type { DecisionKind } from './decisions.js';
import { ResultsFileError } from './errors.js';
import type { ToolSourceKind } from './recorded.js';

/*
 * The results file of `runEval` (`resultsFile`), read back when an interrupted evaluation
 * resumes. A stored run is reused as it is, scored by scorers added since and reported as the
 * agent's: every line is checked whole against the shape this version writes, and one that does
 * not fit is not reused (its case runs again) and is told to `onUnreadable`, once.
 */

const DECISION_KINDS = {
  model: 'model',
  tools: 'tools',
  policy: 'policy',
  compact: 'compact',
  guardrail: 'guardrail',
  approval: 'approval',
  repetition: 'repetition',
  handoff: 'handoff',
  fallback: 'fallback',
  done: 'done',
} as const satisfies { [K in DecisionKind]: K };

const TOOL_SOURCES = { recorded: 'recorded', live: 'live', unrecorded: 'unrecorded' } as const satisfies { [K in ToolSourceKind]: K };

const DecisionSchema = z.strictObject({
  step: z.number().int().positive(),
  run: z.number().int().nonnegative(),
  kind: z.enum(DECISION_KINDS),
  what: z.string(),
  rule: z.string(),
});

/** A stored `CaseRun`, as `runCase` gives it (plain JSON). */
const StoredRunSchema = z.strictObject({
  caseId: z.string(),
  model: z.enum(['live', 'recorded']),
  outcome: AgentOutcomeSchema,
  text: z.string(),
  output: z
    .unknown()
    .refine((value) => jsonValueProblem(value, 'output') === null, { message: 'the output is not plain JSON' })
    .optional(),
  messages: z.array(MessageSchema),
  toolCalls: z.array(z.strictObject({ name: z.string(), args: z.unknown(), content: z.string(), isError: z.boolean(), source: z.enum(TOOL_SOURCES) })),
  turns: z.number().int().nonnegative(),
  usage: UsageSchema,
  costUsd: z.number().nonnegative().optional(),
  ms: z.number().nonnegative(),
  guardrails: z.array(z.strictObject({ name: z.string(), stage: z.enum(['input', 'output']), verdict: z.string() })),
  decisions: z.array(DecisionSchema),
  difference: z.strictObject({ step: z.number().int().positive(), recorded: DecisionSchema.nullable(), got: DecisionSchema.nullable() }).nullable().optional(),
  sessionId: z.string().optional(),
  recordedSessionId: z.string().optional(),
});

/** A stored `CaseScore`. */
const StoredScoreSchema = z.strictObject({
  score: z.number().min(0).max(1).nullable(),
  pass: z.boolean(),
  reason: z.string().optional(),
  error: z.string().optional(),
});

/** A results-file line: one case's result (its run, or the typed error that stopped it) and the digest of the case file it ran from. */
const StoredLineSchema = z
  .strictObject({
    caseId: z.string(),
    caseDigest: z.string().regex(/^[0-9a-f]{64}$/, 'a sha256 digest'),
    run: StoredRunSchema.optional(),
    error: z.strictObject({ code: z.string(), problem: z.string().optional(), message: z.string() }).optional(),
    scores: z.record(z.string(), StoredScoreSchema),
  })
  .refine((line) => (line.run === undefined) !== (line.error === undefined), { message: 'a stored result has a run or an error, one of them' })
  .refine((line) => line.run === undefined || line.run.caseId === line.caseId, { message: "the run is another case's", path: ['run', 'caseId'] });

/** The last line of a results file whose evaluation ran to its end: the next evaluation starts the file over. */
const FinishedLineSchema = z.object({ finished: z.literal(true) });

type StoredLine = z.output<typeof StoredLineSchema>;

/** A case's stored result, and the digest of the case file it was run from. */
export interface StoredResult {
  result: Omit<StoredLine, 'caseDigest'>;
  caseDigest: string;
}

/**
 * The default report of an unreadable line: a process warning on one line, its control
 * characters escaped, since it goes to a terminal.
 */
export function warnUnreadable(error: ResultsFileError): void {
  const escaped = error.message.replace(/[\u0000-\u001f\u007f-\u009f]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
  process.emitWarning(escaped, { type: 'ResultsFileError', code: error.code });
}

/**
 * The results file of an earlier, interrupted evaluation: finished cases by id. One whose
 * evaluation ran to its end (its last line says so) is started over, empty: the agent, its
 * model or its prompts may have changed since, and its runs would be reported as the new
 * agent's. A last line that is not JSON was cut by the interruption, and its case runs again; any
 * other line this version does not read is told to `onUnreadable` and its case runs again (an
 * earlier line of that case is not reused either: the file's last word on it is unreadable).
 */
export async function readResults(file: string, onUnreadable: (error: ResultsFileError) => void): Promise<Map<string, StoredResult>> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ENOENT') return new Map();
    throw error;
  }
  const lines = text.split('\n').map((line, index) => ({ line, number: index + 1 })).filter(({ line }) => line.trim());
  if (lines.length > 0 && FinishedLineSchema.safeParse(parsedLine(lines.at(-1)!.line)).success) {
    await writeFile(file, '');
    return new Map();
  }
  const results = new Map<string, StoredResult>();
  lines.forEach(({ line, number }, index) => {
    const json = parsedLine(line);
    if (json === undefined && index === lines.length - 1) return;
    const read = readLine(json);
    if ('problem' in read) {
      const caseId = (json as { caseId?: unknown } | undefined)?.caseId;
      const named = typeof caseId === 'string' && CASE_ID.test(caseId) ? caseId : undefined;
      if (named !== undefined) results.delete(named);
      onUnreadable(new ResultsFileError(file, number, `${read.problem}; its case runs again`, { caseId: named }));
      return;
    }
    const { caseDigest, ...result } = read.line;
    results.set(result.caseId, { result, caseDigest });
  });
  return results;
}

/** A line's JSON checked as a stored result, or what is wrong with it. */
function readLine(json: unknown): { line: StoredLine } | { problem: string } {
  if (json === undefined) return { problem: 'not JSON' };
  if (nestsDeeperThan(json, MAX_CASE_DEPTH)) return { problem: `JSON nested deeper than ${MAX_CASE_DEPTH} levels` };
  const parsed = StoredLineSchema.safeParse(json);
  if (parsed.success) return { line: parsed.data };
  const issue = parsed.error.issues[0]!;
  const where = issue.path.map((part) => (typeof part === 'number' ? `[${part}]` : `.${String(part)}`)).join('').replace(/^\./, '') || '(line)';
  const more = parsed.error.issues.length > 1 ? ` (and ${parsed.error.issues.length - 1} more)` : '';
  return { problem: `not a result this version reads (${where}: ${issue.message.slice(0, 200)}${more})` };
}

/** A line's JSON, or undefined when it is not JSON. */
function parsedLine(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}
