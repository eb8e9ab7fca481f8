/**
 * The deepest nesting of arrays and objects a JSON value from outside may have. Real tool
 * arguments stay in single digits; the limit keeps a hostile value from overflowing the stack
 * of whoever serializes, clones or walks it later.
 */
export const MAX_JSON_DEPTH = 64;

/**
 * A `{ … }` object: its prototype is Object's or none, so no array, no class instance (a `Map`, a
 * `Headers`, a `Date`), which would look empty to `Object.keys` and to JSON.
 *
 * @example
 * ```ts
 * isPlainObject({ a: 1 }); // true
 * isPlainObject(new Map([['a', 1]])); // false
 * ```
 */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

export interface JsonValueLimits {
  /** Deepest nesting allowed; a scalar is depth 0, `[1]` is depth 1. Default `MAX_JSON_DEPTH`. */
  maxDepth?: number | undefined;
}

/**
 * Why `value` is not plain JSON within limits, or null when it is. Plain JSON is what survives
 * `JSON.stringify` → `JSON.parse` unchanged: null, booleans, strings, finite numbers, arrays
 * without holes and objects whose prototype is `Object.prototype` or null, holding only
 * enumerable data properties with string keys. Refused: `undefined`, functions, symbols,
 * BigInt, NaN and ±Infinity, class instances (Date, Map, …), accessors, symbol keys, cycles,
 * nesting deeper than `maxDepth`. The problem names where it sits, starting from `path`.
 *
 * Pure, and bounded: the walk stops at the depth limit, so a 10,000-deep value overflows no
 * stack, and a value whose reading throws (a Proxy trap) is reported, not thrown.
 *
 * @example
 * ```ts
 * jsonValueProblem({ n: 1, tags: ['a'] }, 'args');       // null
 * jsonValueProblem({ when: new Date() }, 'args');        // "args.when: a Date instance is not plain JSON"
 * jsonValueProblem({ n: 10n }, 'args');                  // "args.n: a bigint is not JSON"
 * ```
 */
export function jsonValueProblem(value: unknown, path = '(value)', limits: JsonValueLimits = {}): string | null {
  const fault = jsonValueFault(value, path, limits);
  return fault && `${fault.path}: ${fault.problem}`;
}

/** Where a value stops being plain JSON, and why. */
export interface JsonValueFault {
  /** Where the offending part sits, starting from the path given. */
  path: string;
  problem: string;
}

/**
 * `jsonValueProblem` with the path and the problem apart, for callers that build their own
 * message around the path.
 *
 * @example
 * ```ts
 * jsonValueFault({ f: () => 1 }, 'args'); // { path: 'args.f', problem: 'a function is not JSON' }
 * ```
 */
export function jsonValueFault(value: unknown, path = '(value)', limits: JsonValueLimits = {}): JsonValueFault | null {
  try {
    const maxDepth = limits.maxDepth ?? MAX_JSON_DEPTH;
    return walk(value, path, maxDepth, { maxDepth, ancestors: new Set() });
  } catch {
    return { path, problem: 'could not be read (reading it threw)' };
  }
}

type Fault = JsonValueFault | null;
interface Walk {
  maxDepth: number;
  /** The objects on the path from the root: meeting one again is a cycle. */
  ancestors: Set<object>;
}
const fault = (path: string, problem: string): JsonValueFault => ({ path, problem });

function walk(value: unknown, path: string, depthLeft: number, walkState: Walk): Fault {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return null;
    case 'number':
      return Number.isFinite(value) ? null : fault(path, `${value} is not a JSON number`);
    case 'object':
      if (value === null) return null;
      break;
    case 'undefined':
      return fault(path, 'undefined is not JSON');
    default:
      return fault(path, `a ${typeof value} is not JSON`);
  }
  if (walkState.ancestors.has(value)) return fault(path, 'the value contains itself (a cycle)');
  if (depthLeft === 0) return fault(path, `nested more than ${walkState.maxDepth} levels deep`);
  if (Array.isArray(value)) return arrayProblem(value, path, depthLeft, walkState);
  const proto = Object.getPrototypeOf(value) as object | null;
  if (proto !== Object.prototype && proto !== null) {
    const name = (proto.constructor as { name?: unknown } | undefined)?.name;
    return fault(path, `a ${typeof name === 'string' && name ? name : 'class'} instance is not plain JSON`);
  }
  if (Object.getOwnPropertySymbols(value).length > 0) return fault(path, 'symbol keys are not JSON');
  walkState.ancestors.add(value);
  const descriptors = Object.getOwnPropertyDescriptors(value);
  for (const key of Object.keys(descriptors)) {
    const descriptor = descriptors[key]!;
    const at = `${path}${/^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`}`;
    if (!('value' in descriptor)) return fault(at, 'an accessor property is not JSON');
    if (!descriptor.enumerable) return fault(at, 'a non-enumerable property is not JSON');
    const problem = walk(descriptor.value, at, depthLeft - 1, walkState);
    if (problem) return problem;
  }
  walkState.ancestors.delete(value);
  return null;
}

function arrayProblem(value: unknown[], path: string, depthLeft: number, walkState: Walk): Fault {
  if (Object.getPrototypeOf(value) !== Array.prototype) return fault(path, 'an array subclass is not plain JSON');
  walkState.ancestors.add(value);
  for (let i = 0; i < value.length; i++) {
    const descriptor = Object.getOwnPropertyDescriptor(value, i);
    if (!descriptor) return fault(`${path}[${i}]`, 'a hole in an array is not JSON');
    if (!('value' in descriptor)) return fault(`${path}[${i}]`, 'an accessor property is not JSON');
    const problem = walk(descriptor.value, `${path}[${i}]`, depthLeft - 1, walkState);
    if (problem) return problem;
  }
  walkState.ancestors.delete(value);
  return null;
}

/**
 * Whether two JSON values hold the same data, as `JSON.stringify` would write it (a property
 * whose value is `undefined` is absent; the order of keys does not count). Anything it is not
 * sure of (NaN, `undefined` in an array) counts as different, so a caller that skips a write on
 * `true` never skips a change.
 *
 * @example
 * ```ts
 * sameJson({ a: 1, b: [true] }, { b: [true], a: 1 }); // true
 * sameJson({ a: 1, c: undefined }, { a: 1 });          // true
 * sameJson({ a: [1] }, { a: [1, 2] });                 // false
 * ```
 */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return a !== undefined;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((item, i) => item !== undefined && sameJson(item, b[i]));
  }
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  const keys = Object.keys(left).filter((key) => left[key] !== undefined);
  const rightCount = Object.keys(right).filter((key) => right[key] !== undefined).length;
  return keys.length === rightCount && keys.every((key) => Object.hasOwn(right, key) && sameJson(left[key], right[key]));
}
