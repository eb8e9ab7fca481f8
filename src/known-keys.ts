import { z } from 'zod';
import { InvalidConfigError } from './errors.js';

/**
 * Strict options, one rule for every options object a user passes (issue 41): a key the API does
 * not know is an error naming the closest known key, so a misspelling (`baseUrl` for `baseURL`,
 * the AI SDK's `parameters` for `input`) is found where it is written instead of being ignored
 * or failing later as a raw `TypeError`.
 */

/** Levenshtein distance with a swap of two neighbours counted as one edit (`lsit` → `list`). */
export function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      rows[i]![j] = d;
    }
  }
  return rows[a.length]![b.length]!;
}

function commonStart(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

/** Keys longer than this are not compared (the distance is quadratic in the length): no guess. */
const MAX_COMPARED_LENGTH = 64;

/**
 * The known name `word` most likely meant, compared case-insensitively: the one at the smallest
 * edit distance (between equally close ones, the one sharing the longer start) when that distance
 * is small for the word's length (a third of it, rounded up); `aliases` maps names other
 * libraries use to ours (`parameters` → `input`). Undefined when nothing is close, or two names
 * are equally close with as long a shared start.
 */
export function closestName(word: string, known: readonly string[], aliases?: ReadonlyMap<string, string>): string | undefined {
  const alias = aliases?.get(word);
  if (alias !== undefined) return alias;
  if (word.length > MAX_COMPARED_LENGTH) return undefined;
  const lower = word.toLowerCase();
  const allowed = Math.ceil(word.length / 3);
  let best: string | undefined;
  let bestScore: [number, number] = [Infinity, 0];
  let tie = false;
  for (const name of known) {
    if (name.length > MAX_COMPARED_LENGTH) continue;
    const other = name.toLowerCase();
    // Closest first; between equally close names, the one sharing the longer start (`maxRetry`: `maxRetries`, not `onRetry`).
    const score: [number, number] = [editDistance(lower, other), commonStart(lower, other)];
    if (score[0] < bestScore[0] || (score[0] === bestScore[0] && score[1] > bestScore[1])) [best, bestScore, tie] = [name, score, false];
    else if (score[0] === bestScore[0] && score[1] === bestScore[1]) tie = true;
  }
  return bestScore[0] <= allowed && !tie ? best : undefined;
}

/** `unknown option "baseUrl" — did you mean "baseURL"?`, or the known options when nothing is close. */
export function unknownOptionMessage(key: string, known: readonly string[], aliases?: ReadonlyMap<string, string>): string {
  const shown = JSON.stringify(key.length > 100 ? `${key.slice(0, 100)}…` : key);
  const guess = closestName(key, known, aliases);
  return guess !== undefined ? `unknown option ${shown} — did you mean ${JSON.stringify(guess)}?` : `unknown option ${shown} (known: ${known.join(', ')})`;
}

/** Where a set of known keys comes from: every key of `T`, listed once (the compiler checks the list is whole). */
export const optionKeys = <T>() => <K extends Record<keyof T, true>>(keys: K & Record<Exclude<keyof K, keyof T>, never>): readonly string[] => Object.keys(keys);

/**
 * The first own key of `options` that is not in `known`, as the message to throw, or null. Only
 * plain objects are read (a class instance or a non-object is left to the API's own checks).
 */
export function unknownKeyProblem(options: unknown, known: readonly string[], aliases?: ReadonlyMap<string, string>): string | null {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) return null;
  const allowed = allowedSet(known);
  for (const key in options) if (Object.hasOwn(options, key) && !allowed.has(key)) return unknownOptionMessage(key, known, aliases);
  return null;
}

/** The known keys as a set, made once per list (the lists are module constants; a config is checked on every run). */
const allowedSets = new WeakMap<readonly string[], ReadonlySet<string>>();
function allowedSet(known: readonly string[]): ReadonlySet<string> {
  let set = allowedSets.get(known);
  if (!set) allowedSets.set(known, (set = new Set(known)));
  return set;
}

/**
 * Throws when `options` has a key outside `known`: `InvalidConfigError` by default, or the API's
 * own options error (`make`), with `where` naming the API: `openAICompatibleModel: unknown
 * option "baseUrl" — did you mean "baseURL"?`.
 *
 * @example
 * ```ts
 * checkKnownKeys({ baseUrl: 'x' }, ['baseURL', 'model'], 'openAICompatibleModel'); // throws InvalidConfigError
 * ```
 */
export function checkKnownKeys(
  options: unknown,
  known: readonly string[],
  where: string,
  make: (message: string) => Error = (message) => new InvalidConfigError(message),
  aliases?: ReadonlyMap<string, string>,
): void {
  const problem = unknownKeyProblem(options, known, aliases);
  if (problem) throw make(where ? `${where}: ${problem}` : problem);
}

/**
 * An options object checked by its zod object schema, strictly: an unknown key first (with the
 * closest known one), then the schema's own checks, the first problem thrown as `make`'s error
 * (`InvalidConfigError` by default) prefixed with `where` (none when empty). The one place a zod refusal of options
 * becomes a message.
 *
 * @example
 * ```ts
 * const budget = parseOptions(z.object({ maxTokens: z.number().optional() }), { maxToken: 5 }, 'budget'); // throws: did you mean "maxTokens"?
 * ```
 */
export function parseOptions<S extends z.ZodType>(schema: S, value: unknown, where: string, make: (message: string) => Error = (message) => new InvalidConfigError(message)): z.output<S> {
  const known = topKeys(schema);
  if (known) checkKnownKeys(value, known, where, make);
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const message = optionIssueMessage(schema, value, parsed.error.issues[0]!, []);
  throw make(where ? `${where}: ${message}` : message);
}

/**
 * What a value is, for a message saying what was expected instead (`…, got true`): a boolean,
 * null or undefined as itself, else its kind (`number`, `string`, `an array`), never the value (it
 * may be long, or a key).
 */
export function kindOf(value: unknown): string {
  if (value === null || value === undefined || typeof value === 'boolean') return String(value);
  return Array.isArray(value) ? 'an array' : typeof value;
}

/** A branch of a union that refused the value for its type (`false` for `true`, an object for `5`), not for something inside it. */
const refusedByType = (branch: readonly z.core.$ZodIssue[]): boolean => branch.some((inner) => inner.path.length === 0 && (inner.code === 'invalid_type' || inner.code === 'invalid_value'));

/**
 * An options issue as one line. zod says only "Invalid input" for a union (`working: false` or an
 * object): it is told by the one branch of the value's own type, down to what is wrong in it (with
 * the closest key for a misspelt one), or, when the value is of no branch's type, as what the
 * branches expect and what it is (`recall: expected false or an object ({ tool, prompt, … }), got true`).
 */
function optionIssueMessage(schema: z.ZodType, value: unknown, issue: z.core.$ZodIssue, base: readonly PropertyKey[]): string {
  const path = [...base, ...issue.path];
  if (issue.code !== 'invalid_union' || issue.errors.length === 0) return issueMessage({ ...issue, path }, knownKeysAt(schema, path));
  const ofItsType = issue.errors.filter((branch) => branch.length > 0 && !refusedByType(branch));
  if (ofItsType.length === 1) return optionIssueMessage(schema, value, ofItsType[0]![0]!, path);
  // Several branches of its type (two kinds of object): which one was meant is not known.
  if (ofItsType.length > 1) return issueMessage({ ...issue, path });
  const expected = issue.errors.map((branch) => expectedOf(branch.find((inner) => inner.path.length === 0)!, knownKeysAt(schema, path)));
  const at = path.length > 0 ? `${path.map(String).join('.')}: ` : '';
  return `${at}expected ${[...new Set(expected)].join(' or ')}, got ${kindOf(valueAt(value, path))}`;
}

/** What a union's branch takes, from the issue with which it refused a value of another type. */
function expectedOf(issue: z.core.$ZodIssue, keys: readonly string[] | undefined): string {
  // String(), not JSON: JSON writes Infinity as null and throws on a bigint.
  if (issue.code === 'invalid_value') return issue.values.map((allowed) => (typeof allowed === 'string' ? JSON.stringify(allowed) : String(allowed))).join(' or ');
  if (issue.code !== 'invalid_type') return issue.message;
  if (issue.expected === 'object') return keys ? `an object ({ ${keys.join(', ')} })` : 'an object';
  if (issue.expected === 'array') return 'a list';
  if (issue.expected === 'null' || issue.expected === 'undefined') return issue.expected;
  return withArticle(issue.expected);
}

/**
 * "a" or "an" by the sound that starts the name, not its letter's case: zod's type names
 * (`an object`, `a string`) and class names (`an Error`, `an AbortSignal`, `a Uint8Array`), and a
 * capital read letter by letter before another capital (`a URL`, `an HTMLElement`).
 */
function withArticle(name: string): string {
  // A capital U is read "you" (Uint8Array, URL): a consonant sound, so it is left out.
  return `${/^(?:[aeiouAEIO]|[FHLMNRSX][A-Z])/.test(name) ? 'an' : 'a'} ${name}`;
}

/** The part of an options value an issue's path points at. */
function valueAt(value: unknown, path: readonly PropertyKey[]): unknown {
  let at = value;
  for (const step of path) at = typeof at === 'object' && at !== null && Object.hasOwn(at, step) ? (at as Record<PropertyKey, unknown>)[step] : undefined;
  return at;
}

/** A schema's own keys, listed once per schema: an options check runs on every run, and `allowedSet` keys its set by the list. */
const topKeysOf = new WeakMap<z.ZodType, readonly string[] | undefined>();
function topKeys(schema: z.ZodType): readonly string[] | undefined {
  if (!topKeysOf.has(schema)) topKeysOf.set(schema, knownKeysAt(schema, []));
  return topKeysOf.get(schema);
}

/**
 * A zod issue as one line, with the suggestion for an unknown key (a `z.strictObject`'s
 * `unrecognized_keys` issue): the one place a strict schema's refusal becomes a message.
 * `known`: the keys of the object the issue's path points into (see `knownKeysAt`).
 */
export function issueMessage(issue: z.core.$ZodIssue, known?: readonly string[]): string {
  const at = issue.path.length > 0 ? `${issue.path.map(String).join('.')}: ` : '';
  if (issue.code === 'unrecognized_keys' && known) return `${at}${unknownOptionMessage(issue.keys[0]!, known)}`;
  return `${at}${issue.message}`;
}

/** Optional, nullable and default wrappers keep the schema inside: the one to read keys from. */
function unwrapped(node: unknown): unknown {
  let inner = node;
  for (let i = 0; i < 8 && inner && typeof inner === 'object' && !('shape' in inner) && typeof (inner as { unwrap?: unknown }).unwrap === 'function'; i++) inner = (inner as { unwrap: () => unknown }).unwrap();
  return inner;
}

type SchemaNode = { shape?: Record<string, unknown> | undefined; element?: unknown; options?: unknown } | undefined;

const hasShape = (node: SchemaNode): boolean => typeof node?.shape === 'object' && node.shape !== null;

/**
 * The schema to read keys from at a node: the node unwrapped, or a union's one object branch
 * (`working: false` or an object), so a misspelt key inside it is named with the closest one.
 * A union of several objects has no one set of keys.
 */
function keyedNode(node: unknown): SchemaNode {
  const inner = unwrapped(node) as SchemaNode;
  if (!Array.isArray(inner?.options)) return inner;
  const objects = (inner.options as unknown[]).map((option) => unwrapped(option) as SchemaNode).filter(hasShape);
  return objects.length === 1 ? objects[0] : inner;
}

/** The keys an object schema knows at `path` (through nested objects, arrays and a union's one object), for `issueMessage`. */
export function knownKeysAt(schema: z.ZodType, path: readonly PropertyKey[]): readonly string[] | undefined {
  let node: unknown = schema;
  for (const step of path) {
    const at = keyedNode(node);
    node = typeof step === 'number' ? at?.element : at?.shape?.[String(step)];
  }
  const at = keyedNode(node);
  return hasShape(at) ? Object.keys(at!.shape!) : undefined;
}
