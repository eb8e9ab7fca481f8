import { mkdir, readdir, readFile, rename, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { z } from 'zod';
import { MessageSchema, OutcomeSchema } from '../schemas.js';
import { TraceEntrySchema } from '../sessions/trace.js';
import { DatasetError } from './errors.js';

/*
 * A dataset is a folder of cases, one pretty-printed JSON file per case (`<id>.json`), keys in a
 * fixed order: a case added, removed or changed is one file in a git diff, and a corrupt file
 * costs only its own case.
 */

/** The case file format this build writes and reads. */
export const CASE_FORMAT = 1;

const OUTCOME_TYPES = OutcomeSchema.options.map((option) => option.shape.type.value);

/** What a hand-written case expects of its run; each key is checked by the `expectations()` scorers. */
export const ExpectationsSchema = z.strictObject({
  /** The last run's outcome type. */
  outcome: z.enum(OUTCOME_TYPES as [string, ...string[]]).optional(),
  /** The final text: equal to, containing (every one of), matching (a regular expression's source). */
  text: z
    .strictObject({ equals: z.string().optional(), contains: z.union([z.string(), z.array(z.string())]).optional(), matches: z.string().optional() })
    .optional(),
  /** The structured answer (`outcome.output`) equals this JSON value. */
  output: z.strictObject({ equals: z.unknown() }).optional(),
  /**
   * The tool calls made: `calls` (name, and args when given) in `order` ('exact': these calls and
   * no other, in this order; 'inOrder': these in this order, others between allowed; 'any': each
   * made at least once); `only`: no tool outside this list was called.
   */
  tools: z
    .strictObject({
      calls: z.array(z.strictObject({ name: z.string(), args: z.unknown().optional() })).optional(),
      order: z.enum(['exact', 'inOrder', 'any']).optional(),
      only: z.array(z.string()).optional(),
    })
    .optional(),
  /** Budgets over all the case's runs. */
  budget: z
    .strictObject({ maxTurns: z.number().int().nonnegative().optional(), maxTokens: z.number().int().nonnegative().optional(), maxCostUsd: z.number().nonnegative().optional() })
    .optional(),
  /** Wall time of the case's runs, in ms. */
  maxMs: z.number().nonnegative().optional(),
});
export type Expectations = z.infer<typeof ExpectationsSchema>;

/** A recorded session: where it came from and its trace, entry by entry, as the session stored it. */
export const RecordingSchema = z.strictObject({
  sessionId: z.string(),
  /** The state row version the session was stored with (older rows are read through their migrations). */
  rowVersion: z.number().int().nonnegative(),
  trace: z.array(TraceEntrySchema),
});
export type Recording = z.infer<typeof RecordingSchema>;

/**
 * The deepest a case's JSON may nest (objects and arrays). A case nests a few levels, and tool
 * arguments or answers a few more; far deeper is a broken or hostile file, and it would overflow
 * the stack of what reads it recursively (arguments compared, a case written back), failing the
 * case's run as if the agent's tool had.
 */
export const MAX_CASE_DEPTH = 256;

/** Whether a parsed JSON value nests deeper than `max` (walked without recursion). */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const stack: { value: unknown; depth: number }[] = [{ value, depth: 0 }];
  while (stack.length > 0) {
    const { value: at, depth } = stack.pop()!;
    if (at === null || typeof at !== 'object') continue;
    if (depth + 1 > max) return true;
    for (const child of Array.isArray(at) ? at : Object.values(at)) stack.push({ value: child, depth: depth + 1 });
  }
  return false;
}

/** A case id is its file name: letters, digits, `.`, `_`, `-`. */
export const CASE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** One case: the run's input (one prompt per run, in order), what it expects, and the recording it came from if any. */
export const EvalCaseSchema = z.strictObject({
  format: z.literal(CASE_FORMAT),
  id: z.string().regex(CASE_ID, 'a case id: letters, digits, ".", "_" or "-", at most 128'),
  description: z.string().optional(),
  /** The user's message of each run, in order. */
  input: z.array(z.string()).min(1),
  /** The conversation before the first run. */
  history: z.array(MessageSchema).optional(),
  expect: ExpectationsSchema.optional(),
  /**
   * What a quarantined tool answers in a hand-written case: the first entry with the call's name
   * (and its args, when given) is its result. A recording's results come first.
   */
  toolResults: z.array(z.strictObject({ name: z.string(), args: z.unknown().optional(), content: z.string(), isError: z.boolean().optional() })).optional(),
  recording: RecordingSchema.optional(),
});
export type EvalCase = z.infer<typeof EvalCaseSchema>;
export type EvalCaseInput = z.input<typeof EvalCaseSchema>;

/** A loaded dataset: the cases that read, and a typed error for each file that did not. */
export interface Dataset {
  cases: EvalCase[];
  problems: DatasetError[];
}

const TOP_ORDER = ['format', 'id', 'description', 'input', 'history', 'expect', 'toolResults', 'recording'];

/** JSON with keys in a fixed order: the case's own first (as `TOP_ORDER`), every nested object's sorted. */
export function caseJson(evalCase: EvalCase): string {
  const sorted = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(sorted);
    if (value === null || typeof value !== 'object') return value;
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .filter((key) => (value as Record<string, unknown>)[key] !== undefined)
        .map((key) => [key, sorted((value as Record<string, unknown>)[key])]),
    );
  };
  const top = evalCase as Record<string, unknown>;
  const ordered = Object.fromEntries(TOP_ORDER.filter((key) => top[key] !== undefined).map((key) => [key, sorted(top[key])]));
  return `${JSON.stringify(ordered, null, 2)}\n`;
}

/**
 * Writes cases into a dataset folder, one file each (`<id>.json`, replaced whole: written aside, then renamed).
 *
 * @example
 * ```ts
 * await saveCases('evals/support', [{ format: 1, id: 'refund', input: ['I want my money back'], expect: { outcome: 'Completed' } }]);
 * ```
 */
export async function saveCases(folder: string, cases: readonly EvalCaseInput[]): Promise<string[]> {
  await mkdir(folder, { recursive: true });
  const written: string[] = [];
  for (const input of cases) {
    const parsed = EvalCaseSchema.safeParse(input);
    const id = typeof (input as { id?: unknown })?.id === 'string' ? (input as { id: string }).id : undefined;
    if (nestsDeeperThan(input, MAX_CASE_DEPTH)) throw new DatasetError(`${id ?? '(no id)'}.json`, `JSON nested deeper than ${MAX_CASE_DEPTH} levels`, id ? { caseId: id } : {});
    if (!parsed.success) throw new DatasetError(`${id ?? '(no id)'}.json`, z.prettifyError(parsed.error), id ? { caseId: id } : {});
    const file = join(folder, `${parsed.data.id}.json`);
    await writeFile(`${file}.tmp`, caseJson(parsed.data));
    await rename(`${file}.tmp`, file);
    written.push(file);
  }
  return written;
}

/**
 * Reads a dataset folder: every `*.json` file in name order is one case, checked against the
 * schema. A file that is not JSON or not a case becomes a `DatasetError` (file, line, case) in
 * `problems`; the others load. Two files with one id: the second is a problem.
 *
 * @example
 * ```ts
 * const { cases, problems } = await loadDataset('evals/support');
 * console.log(`${cases.length} cases, ${problems.length} unreadable`);
 * ```
 */
export async function loadDataset(folder: string): Promise<Dataset> {
  let names: string[];
  try {
    names = (await readdir(folder)).filter((name) => name.endsWith('.json')).sort();
  } catch (error) {
    throw new DatasetError(folder, `cannot read the dataset folder: ${(error as Error).message}`, { cause: error });
  }
  const cases: EvalCase[] = [];
  const problems: DatasetError[] = [];
  const seen = new Set<string>();
  for (const name of names) {
    const file = join(folder, name);
    try {
      const evalCase = parseCase(await readFile(file, 'utf8'), file);
      if (seen.has(evalCase.id)) throw new DatasetError(file, `a second case with id '${evalCase.id}'`, { caseId: evalCase.id });
      seen.add(evalCase.id);
      cases.push(evalCase);
    } catch (error) {
      problems.push(DatasetError.isInstance(error) ? error : new DatasetError(file, (error as Error).message, { cause: error }));
    }
  }
  return { cases, problems };
}

/** One case file's text as a case, or a DatasetError naming the file, the line (for bad JSON) and the case. */
export function parseCase(text: string, file: string): EvalCase {
  const fromName = basename(file, '.json');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    const line = syntaxErrorLine(text, (error as Error).message);
    throw new DatasetError(file, `not JSON: ${(error as Error).message}`, { caseId: fromName, ...(line !== undefined && { line }) });
  }
  const id = typeof (json as { id?: unknown })?.id === 'string' ? (json as { id: string }).id : fromName;
  if (nestsDeeperThan(json, MAX_CASE_DEPTH)) throw new DatasetError(file, `JSON nested deeper than ${MAX_CASE_DEPTH} levels`, { caseId: id });
  const format = (json as { format?: unknown })?.format;
  if (format !== CASE_FORMAT) {
    throw new DatasetError(file, `case format ${JSON.stringify(format)}: this build reads format ${CASE_FORMAT}`, { caseId: id });
  }
  const parsed = EvalCaseSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.map((part) => (typeof part === 'number' ? `[${part}]` : `.${String(part)}`)).join('').replace(/^\./, '');
    throw new DatasetError(file, `${where || '(root)'}: ${issue.message}${parsed.error.issues.length > 1 ? ` (and ${parsed.error.issues.length - 1} more)` : ''}`, { caseId: id, ...lineOf(text, issue.path) });
  }
  if (parsed.data.id !== fromName) throw new DatasetError(file, `the case id '${parsed.data.id}' is not the file's name`, { caseId: parsed.data.id });
  return parsed.data;
}

/**
 * The line of a JSON syntax error: from the position or line Node names, else (Node 20 names
 * neither) from the excerpt it quotes around the unexpected token.
 */
function syntaxErrorLine(text: string, message: string): number | undefined {
  const line = /\(line (\d+) column \d+\)/.exec(message);
  if (line) return Number(line[1]);
  const position = /position (\d+)/.exec(message);
  if (position) return text.slice(0, Number(position[1])).split('\n').length;
  const excerpt = /^Unexpected token '(.)', (?:\.\.\.)?"([\s\S]*?)"(?:\.\.\.)? is not valid JSON$/.exec(message);
  if (!excerpt) return undefined;
  const at = text.indexOf(excerpt[2]!);
  if (at === -1) return undefined;
  return text.slice(0, at + excerpt[2]!.indexOf(excerpt[1]!)).split('\n').length;
}

/**
 * The line of the problem's path in a pretty-printed case: the line of the last key of the path
 * found, scanning forward (a good guess for the files `saveCases` writes, none for others).
 */
function lineOf(text: string, path: readonly PropertyKey[]): { line?: number | undefined } {
  let offset = 0;
  for (const part of path) {
    if (typeof part !== 'string') continue;
    const at = text.indexOf(`"${part}":`, offset);
    if (at === -1) break;
    offset = at;
  }
  return offset > 0 ? { line: text.slice(0, offset).split('\n').length } : {};
}
