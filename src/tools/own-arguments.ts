import { z } from 'zod';
import { InvalidToolError } from './errors.js';
import type { JsonSchema } from './json-schema.js';
import { isPlainObject } from '../json-value.js';

/*
 * Tool arguments are read as own properties only. zod (4.6.7) reads an object's members, so an
 * argument named like an Object.prototype member (`toString`, `constructor`, `hasOwnProperty`)
 * is "present" when absent: an optional one is refused ("received function") and a required one
 * passes as the inherited function. And zod skips a `__proto__` key on purpose (its output could
 * not hold it as an own property), so such an argument is never enforced. zod cannot be told
 * otherwise, so the guard sits before it: the arguments are copied into null-prototype objects
 * (nothing is inherited, `__proto__` is a plain key), and `__proto__` keys are validated here,
 * against their JSON Schema, then put back on zod's output as own properties.
 */

const PROTO = '__proto__';

/** A declared `__proto__` argument: where its object is, and its validator. */
interface ProtoKey {
  /** The property names from the arguments down to the object that holds the key. */
  parent: readonly string[];
  required: boolean;
  validator: z.ZodType;
}

export interface ArgumentIssue {
  path: readonly PropertyKey[];
  message: string;
}

export type ParsedArguments = { success: true; data: unknown } | { success: false; issues: ArgumentIssue[] };

/** What the guard needs of a tool: its validator and the JSON Schema the model sees. */
interface Validated {
  readonly name: string;
  readonly input: z.ZodType;
  readonly definition: { readonly inputSchema: JsonSchema };
}

const plans = new WeakMap<Validated, readonly ProtoKey[]>();

/** Sub-schema keywords under which a `__proto__` key cannot be followed to its place in the arguments. */
const OPAQUE_KEYWORDS = ['items', 'prefixItems', 'additionalProperties', 'patternProperties', 'anyOf', 'oneOf', 'allOf', 'not', '$defs', 'definitions'];

/**
 * The `__proto__` arguments a tool's schema declares. Throws `InvalidToolError` for one this guard
 * cannot place (inside an array, a union, a definition, or another `__proto__` argument), since
 * zod would silently never enforce it.
 */
export function protoKeys(toolName: string, schema: JsonSchema): readonly ProtoKey[] {
  const found: ProtoKey[] = [];
  const walk = (node: unknown, parent: readonly string[] | null, at: string): void => {
    if (typeof node !== 'object' || node === null) return;
    const record = node as Record<string, unknown>;
    const properties = record.properties;
    if (typeof properties === 'object' && properties !== null) {
      for (const [key, sub] of Object.entries(properties)) {
        const where = `${at}.properties.${key}`;
        if (key === PROTO) {
          if (parent === null) throw new InvalidToolError(toolName, `a "__proto__" argument is only supported as a property of nested objects, not at ${where}`);
          const required = Array.isArray(record.required) && record.required.includes(PROTO);
          found.push({ parent, required, validator: subValidator(toolName, sub, where) });
          walk(sub, null, where);
        } else walk(sub, parent && [...parent, key], where);
      }
    }
    for (const keyword of OPAQUE_KEYWORDS) {
      const sub = record[keyword];
      if (Array.isArray(sub)) sub.forEach((item, i) => walk(item, null, `${at}.${keyword}[${i}]`));
      else if (keyword === 'items' || keyword === 'additionalProperties' || keyword === 'not') walk(sub, null, `${at}.${keyword}`);
      else if (typeof sub === 'object' && sub !== null) for (const [key, item] of Object.entries(sub)) walk(item, null, `${at}.${keyword}.${key}`);
    }
  };
  walk(schema, [], 'inputSchema');
  return found;
}

function subValidator(toolName: string, schema: unknown, where: string): z.ZodType {
  try {
    return z.fromJSONSchema(schema as JsonSchema);
  } catch (error) {
    throw new InvalidToolError(toolName, `the schema of ${where} cannot be used for validation: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** Records a defined tool's `__proto__` arguments (checked once, at definition time). */
export function rememberProtoKeys(tool: Validated, keys: readonly ProtoKey[]): void {
  plans.set(tool, keys);
}

function planFor(tool: Validated): readonly ProtoKey[] {
  let plan = plans.get(tool);
  if (!plan) {
    plan = protoKeys(tool.name, tool.definition.inputSchema);
    plans.set(tool, plan);
  }
  return plan;
}

/**
 * Validates a tool call's arguments as own properties (see above) with the tool's schema. May
 * throw what the tool's own refinements throw, as `safeParse` does.
 *
 * @example
 * ```ts
 * const parsed = parseToolArguments(tool, call.args);
 * if (!parsed.success) console.log(parsed.issues.map((issue) => issue.path.join('.')));
 * ```
 */
export function parseToolArguments(tool: Validated, args: unknown): ParsedArguments {
  const copies = new WeakSet<object>();
  const bare = bareCopy(args, copies);
  const parsed = tool.input.safeParse(bare);
  const issues: ArgumentIssue[] = parsed.success ? [] : parsed.error.issues.map(({ path, message }) => ({ path, message }));
  const data = parsed.success ? withPrototypes(parsed.data, copies) : undefined;
  for (const key of planFor(tool)) {
    const holder = follow(bare, key.parent);
    // A holder that is absent or not an object is zod's to report.
    if (holder === undefined) continue;
    const present = Object.hasOwn(holder, PROTO);
    if (!present && !key.required) continue;
    const value = present ? key.validator.safeParse(holder[PROTO]) : { success: false as const, error: undefined };
    if (!value.success) {
      const path = [...key.parent, PROTO];
      const found = value.error?.issues.map((issue) => ({ path: [...path, ...issue.path], message: issue.message }));
      issues.push(...(found ?? [{ path, message: 'Invalid input: expected a value, received undefined' }]));
      continue;
    }
    const target = data === undefined ? undefined : follow(data, key.parent);
    if (target && !Object.isFrozen(target)) own(target, PROTO, withPrototypes(value.data, copies));
  }
  return issues.length > 0 ? { success: false, issues } : { success: true, data };
}

/** Plain objects and arrays copied with own enumerable keys only, into null-prototype objects. */
function bareCopy(value: unknown, copies: WeakSet<object>): unknown {
  if (Array.isArray(value)) return value.map((item) => bareCopy(item, copies));
  if (!isPlainObject(value)) return value;
  const copy = Object.create(null) as Record<string, unknown>;
  for (const key of Object.keys(value)) copy[key] = bareCopy(value[key], copies);
  copies.add(copy);
  return copy;
}

/**
 * zod passes some values through as given (`z.unknown()`, `z.json()`): the guard's null-prototype
 * copies become ordinary objects again, so a tool can still call `String(args.x)` on them.
 * zod's own output objects are kept (changed in place where they hold a copy, unless frozen).
 */
function withPrototypes(value: unknown, copies: WeakSet<object>, seen = new Set<object>()): unknown {
  if (typeof value !== 'object' || value === null || seen.has(value)) return value;
  seen.add(value);
  if (Array.isArray(value)) {
    if (Object.isFrozen(value)) return value;
    for (let i = 0; i < value.length; i++) value[i] = withPrototypes(value[i], copies, seen);
    return value;
  }
  if (!isPlainObject(value)) return value;
  const fresh = copies.has(value);
  if (!fresh && Object.isFrozen(value)) return value;
  const target: Record<string, unknown> = fresh ? {} : value;
  for (const key of Object.keys(value)) {
    const next = withPrototypes(value[key], copies, seen);
    if (fresh || next !== value[key]) own(target, key, next);
  }
  return target;
}

/** Sets an own property, `__proto__` included (an assignment would set the prototype instead). */
function own(target: object, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

/** The plain object at `path` under `value`, own properties only. */
function follow(value: unknown, path: readonly string[]): Record<string, unknown> | undefined {
  let at = value;
  for (const key of path) {
    if (!isPlainObject(at) || !Object.hasOwn(at, key)) return undefined;
    at = at[key];
  }
  return isPlainObject(at) ? at : undefined;
}
