import { z } from 'zod';
import type { ToolDefinition } from '../model.js';
import { DuplicateToolError, InvalidToolError } from './errors.js';

/** What a running tool gets besides its arguments. */
export interface ToolContext {
  /** Aborted when the tool times out or the run is cancelled; pass it on to fetch, child processes... */
  readonly signal: AbortSignal;
  readonly toolCallId: string;
  /** Stable across a restore that repeats this call: hand it to external APIs that deduplicate. */
  readonly idempotencyKey: string;
}

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
  needsApproval?: boolean | ((args: z.output<S>, ctx: ApprovalContext) => boolean | Promise<boolean>);
}

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
 * A tool the model can call: its name and description, a zod 4 schema for the arguments (what the
 * model sees as JSON Schema, and what validates its arguments), and `execute`. Throws
 * `InvalidToolError` for a name no provider accepts, a schema without an object JSON Schema, or a
 * zod 3 schema.
 * @example
 * ```ts
 * const add = defineTool({
 *   name: 'add',
 *   description: 'Adds two numbers.',
 *   input: z.object({ a: z.number(), b: z.number() }),
 *   execute: ({ a, b }) => a + b,   // the result goes to the model as JSON (a string as is)
 *   timeoutMs: 5_000,
 * });
 * ```
 */
export function defineTool<S extends z.ZodType, O>(spec: ToolSpec<S, O>): Tool<S, O> {
  const meta = ToolMetaSchema.safeParse(spec);
  if (!meta.success) throw new InvalidToolError(String(spec.name), z.prettifyError(meta.error));
  return Object.freeze({
    name: spec.name,
    description: spec.description,
    input: spec.input,
    execute: spec.execute,
    timeoutMs: spec.timeoutMs,
    needsApproval: spec.needsApproval,
    // Built once here so a schema mistake fails at definition time, not at the first model call.
    definition: Object.freeze({
      name: spec.name,
      description: spec.description,
      inputSchema: argumentsSchema(spec.name, spec.input),
    }),
  });
}

/**
 * A zod 3 schema has `_def` but not zod 4's `_zod`. zod 4 cannot read it (its JSON Schema
 * conversion dies on `undefined.def`), so say what it is and how to get a zod 4 one.
 */
function zod3Problem(input: unknown): string | undefined {
  if (typeof input !== 'object' || input === null || '_zod' in input) return undefined;
  if (!('_def' in input)) return 'its input schema is not a zod schema';
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
