import { z } from 'zod';
import type { ToolDefinition } from '../model.js';
import { DuplicateToolError, InvalidToolError } from './errors.js';
import { jsonSchemaValidator, type JsonSchema } from './json-schema.js';
import { protoKeys, rememberProtoKeys } from './own-arguments.js';
import { issueMessage, optionKeys, unknownKeyProblem } from '../known-keys.js';

/** What a running tool gets besides its arguments. */
export interface ToolContext {
  /** Aborted when the tool times out or the run is cancelled; pass it on to fetch, child processes... */
  readonly signal: AbortSignal;
  readonly toolCallId: string;
  /** Stable across a restore that repeats this call: hand it to external APIs that deduplicate. */
  readonly idempotencyKey: string;
  /** The session the call belongs to (absent when the tool runs outside an agent, as `runToolCalls` alone). */
  readonly sessionId?: string | undefined;
  /**
   * The session's memory scope (whose session it is: a user, a resource, a team), if it was
   * opened with one (`DurableSession.open({ scope })`, `runAgent({ scope })`): key what the tool
   * reads and writes for that user by it. A child run (an agent tool's) has its parent's.
   */
  readonly scope?: string | undefined;
}

/**
 * What a resumed run does with a call of this tool that was in flight with no recorded result.
 *
 * @example
 * ```ts
 * import { InDoubtPolicySchema } from 'loopchart/schemas';
 *
 * InDoubtPolicySchema.parse('ask'); // 'ask'; 'maybe' throws
 * ```
 */
export const InDoubtPolicySchema = z.enum(['rerun', 'ask']);
export type InDoubtPolicy = z.infer<typeof InDoubtPolicySchema>;

/**
 * The model-facing metadata of a tool. Names follow the rule OpenAI and Anthropic share, so a tool
 * that works with one provider works with the others.
 */
export const ToolMetaSchema = z.object({
  name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, 'must be 1-64 characters of a-z, A-Z, 0-9, _ or -'),
  description: z.string(),
  /**
   * Longest one call may run, in ms. Default: the runner's `defaultTimeoutMs`
   * (DEFAULT_TOOL_TIMEOUT_MS, 5 minutes). `Infinity` turns the timeout off for this tool; it is the
   * only way to, so a forgotten or mistyped value never means "wait forever".
   */
  timeoutMs: z.union([z.number().int().positive(), z.literal(Number.POSITIVE_INFINITY)]).optional(),
  /**
   * What a run resumed after a crash does with a call of this tool that was in flight with no
   * recorded result: `'rerun'` runs it again with the same idempotency key, `'ask'` waits for a
   * person to run it again, give its result or fail it (`doubt.decide`). Default: `'ask'` for a
   * tool with `needsApproval`, `'rerun'` for the others.
   */
  inDoubt: InDoubtPolicySchema.optional(),
});
export type ToolMeta = z.infer<typeof ToolMetaSchema>;

export interface ToolSpec<S extends z.ZodType, O = unknown> extends ToolMeta {
  /** Validates the model's arguments; its JSON Schema (input side) is what the model sees. */
  input: S;
  /**
   * Returns the result for the model: a string as is, anything else as JSON. Throwing (or timing
   * out) becomes an error result the model can read; the loop goes on.
   */
  execute(args: z.output<S>, ctx: ToolContext): O;
  /**
   * Whether a call must wait for a human's approval before it runs (seed 003: an approval
   * step yields until the decision is saved). A function sees the validated arguments.
   */
  needsApproval?: boolean | ((args: z.output<S>, ctx: ApprovalContext) => boolean | Promise<boolean>) | undefined;
}

/**
 * A tool whose input is a JSON Schema rather than a zod schema (an MCP server's tool, a schema
 * written by hand): the model sees `inputSchema` as given (less a top-level `$schema`), and the
 * arguments are validated against it before `execute` sees them.
 */
export interface JsonSchemaToolSpec<O = unknown> extends ToolMeta {
  inputSchema: JsonSchema;
  execute(args: Record<string, unknown>, ctx: ToolContext): O;
  needsApproval?: boolean | ((args: Record<string, unknown>, ctx: ApprovalContext) => boolean | Promise<boolean>) | undefined;
}

/** Every key a tool spec may have (a zod `input` or a JSON Schema `inputSchema`). */
const TOOL_KEYS = optionKeys<ToolSpec<z.ZodType> & JsonSchemaToolSpec>()({
  name: true,
  description: true,
  timeoutMs: true,
  inDoubt: true,
  input: true,
  inputSchema: true,
  execute: true,
  needsApproval: true,
});
/** Names other tool libraries use for ours: the AI SDK's `parameters` (its name before v5) is our `input`. */
const TOOL_KEY_ALIASES: ReadonlyMap<string, string> = new Map([
  ['parameters', 'input'],
  ['handler', 'execute'],
  ['run', 'execute'],
]);

export interface ApprovalContext {
  readonly toolCallId: string;
  readonly sessionId: string;
}

/**
 * A defined tool. The parameters default to any schema and any result so that lists of differently
 * typed tools type-check; `execute` is a method so that its argument stays assignable in such lists.
 */
export interface Tool<S extends z.ZodType = z.ZodType, O = unknown> extends Readonly<ToolSpec<S, O>> {
  readonly definition: ToolDefinition;
}

/**
 * A tool the model can call: its name and description, the arguments' schema (what the model
 * sees, and what validates its arguments), and `execute`. The schema is either a zod 4 schema
 * (`input`, shown to the model as its input-side JSON Schema) or a JSON Schema (`inputSchema`,
 * shown as given, validated through zod 4's `z.fromJSONSchema`). Throws `InvalidToolError` for a
 * name no provider accepts, a schema that does not describe an object, a zod 3 schema, or a JSON
 * Schema that is malformed or uses what the validator cannot enforce (`if`/`then`/`else`...).
 * @example
 * ```ts
 * const add = defineTool({
 *   name: 'add',
 *   description: 'Adds two numbers.',
 *   input: z.object({ a: z.number(), b: z.number() }),
 *   execute: ({ a, b }) => a + b,   // the result goes to the model as JSON (a string as is)
 *   timeoutMs: 5_000,
 * });
 * const shout = defineTool({
 *   name: 'shout',
 *   description: 'Upper-cases a text.',
 *   inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
 *   execute: (args) => String(args.text).toUpperCase(),
 * });
 * ```
 */
export function defineTool<S extends z.ZodType, O>(spec: ToolSpec<S, O>): Tool<S, O>;
export function defineTool<O>(spec: JsonSchemaToolSpec<O>): Tool<z.ZodType<Record<string, unknown>>, O>;
export function defineTool(spec: ToolSpec<z.ZodType> | JsonSchemaToolSpec): Tool {
  if (typeof spec !== 'object' || spec === null) throw new InvalidToolError(String(spec), 'defineTool takes an object { name, description, input, execute }');
  // A defined tool spread into a new one (`defineTool({ ...tool, execute })`) brings its
  // `definition`, which is rebuilt from the spec: not an unknown option.
  const { definition: _rebuilt, ...own } = spec as typeof spec & { definition?: unknown };
  const unknown = unknownKeyProblem(own, TOOL_KEYS, TOOL_KEY_ALIASES);
  if (unknown) throw new InvalidToolError(String(spec.name), unknown);
  const meta = ToolMetaSchema.safeParse(spec);
  // One line naming each option, as the other refusals here (zod's pretty print is two lines per issue).
  if (!meta.success) throw new InvalidToolError(String(spec.name), meta.error.issues.map((issue) => issueMessage(issue)).join('; '));
  // Checked here: a needsApproval of 'yes' was accepted and failed every run that called the tool.
  if (typeof spec.execute !== 'function') throw new InvalidToolError(spec.name, 'execute must be a function');
  const approval: unknown = spec.needsApproval;
  if (approval !== undefined && typeof approval !== 'boolean' && typeof approval !== 'function') {
    throw new InvalidToolError(spec.name, `needsApproval must be a boolean or a function, got ${typeof approval}`);
  }
  const { input, inputSchema } = toolInput(spec);
  // zod never enforces a `__proto__` argument: the guard does, so one it cannot place fails here.
  const ownKeys = protoKeys(spec.name, inputSchema);
  const tool: Tool = Object.freeze({
    name: spec.name,
    description: spec.description,
    input,
    execute: spec.execute as Tool['execute'],
    timeoutMs: spec.timeoutMs,
    inDoubt: meta.data.inDoubt,
    needsApproval: spec.needsApproval as Tool['needsApproval'],
    // Built once here so a schema mistake fails at definition time, not at the first model call.
    definition: Object.freeze({ name: spec.name, description: spec.description, inputSchema }),
  });
  rememberProtoKeys(tool, ownKeys);
  return tool;
}

/**
 * Whether a tool has an approval rule (`needsApproval` true or a function): its calls may wait
 * for a person. The one place that says so, for the chart, tool sources and in-doubt calls.
 *
 * @example
 * ```ts
 * hasApprovalRule({ needsApproval: () => true }); // true: a rule that decides per call
 * hasApprovalRule({ needsApproval: false }); // false
 * ```
 */
export function hasApprovalRule(tool: { needsApproval?: unknown }): boolean {
  return tool.needsApproval !== undefined && tool.needsApproval !== false;
}

/**
 * The policy of a tool: its own `inDoubt`, else `'ask'` for a tool that needs approval (its
 * effects are the ones a person guards, and a person is in the loop already) and `'rerun'` for
 * the others (today's behaviour, right for reads and idempotent writes).
 */
export function inDoubtPolicy(tool: { inDoubt?: InDoubtPolicy | undefined; needsApproval?: unknown } | undefined): InDoubtPolicy {
  if (!tool) return 'rerun';
  if (tool.inDoubt) return tool.inDoubt;
  return hasApprovalRule(tool) ? 'ask' : 'rerun';
}

/** The validator and the schema the model sees, from whichever of `input` / `inputSchema` was given. */
function toolInput(spec: ToolSpec<z.ZodType> | JsonSchemaToolSpec): { input: z.ZodType; inputSchema: Record<string, unknown> } {
  const given = spec as { input?: unknown; inputSchema?: unknown };
  if (given.inputSchema === undefined) return { input: given.input as z.ZodType, inputSchema: argumentsSchema(spec.name, given.input as z.ZodType) };
  if (given.input !== undefined) throw new InvalidToolError(spec.name, 'give either `input` (a zod schema) or `inputSchema` (a JSON Schema), not both');
  const converted = jsonSchemaValidator(given.inputSchema);
  if ('problem' in converted) throw new InvalidToolError(spec.name, converted.problem);
  // The model sees the schema as given; only `$schema` goes, as for zod schemas (Gemini rejects it).
  const { $schema: _dialect, ...inputSchema } = given.inputSchema as Record<string, unknown>;
  return { input: converted.validator, inputSchema };
}

/**
 * A zod 3 schema has `_def` but not zod 4's `_zod`. zod 4 cannot read it (its JSON Schema
 * conversion dies on `undefined.def`), so say what it is and how to get a zod 4 one.
 */
function zod3Problem(input: unknown): string | undefined {
  if (typeof input !== 'object' || input === null || '_zod' in input) return undefined;
  if (!('_def' in input)) return 'its input schema is not a zod schema (a JSON Schema goes in `inputSchema`)';
  return (
    'its input schema is a zod 3 schema; loopchart needs zod 4 schemas. ' +
    "Install zod 4 (npm install zod@^4) and import { z } from 'zod', or with zod 3.25 import { z } from 'zod/v4'"
  );
}

function argumentsSchema(name: string, input: z.ZodType): Record<string, unknown> {
  const wrongZod = zod3Problem(input);
  if (wrongZod) throw new InvalidToolError(name, wrongZod);
  let schema: Record<string, unknown>;
  try {
    // The input side: fields with defaults are optional for the model.
    schema = { ...z.toJSONSchema(input, { io: 'input' }) };
  } catch (error) {
    throw new InvalidToolError(name, `its input schema has no JSON Schema form: ${(error as Error).message}`, {
      cause: error,
    });
  }
  if (schema.type !== 'object') {
    throw new InvalidToolError(name, 'its input schema must describe an object: providers send tool arguments as a JSON object');
  }
  // Some providers (Gemini) reject the `$schema` key inside a function declaration.
  delete schema.$schema;
  return schema;
}

export function toolDefinitions(tools: Iterable<Tool>): ToolDefinition[] {
  return Array.from(tools, (tool) => tool.definition);
}

/** Tools indexed by name. Immutable: build a new set to change the tools. */
export class ToolSet implements Iterable<Tool> {
  readonly #byName = new Map<string, Tool>();
  /** For the model request, in the order the tools were given. */
  readonly definitions: readonly ToolDefinition[];

  constructor(tools: Iterable<Tool>) {
    for (const tool of tools) {
      if (this.#byName.has(tool.name)) throw new DuplicateToolError(tool.name);
      this.#byName.set(tool.name, tool);
    }
    this.definitions = Object.freeze(toolDefinitions(this.#byName.values()));
  }

  get(name: string): Tool | undefined {
    return this.#byName.get(name);
  }

  has(name: string): boolean {
    return this.#byName.has(name);
  }

  get names(): string[] {
    return [...this.#byName.keys()];
  }

  get size(): number {
    return this.#byName.size;
  }

  [Symbol.iterator](): Iterator<Tool> {
    return this.#byName.values();
  }
}
