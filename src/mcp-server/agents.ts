import { z } from 'zod';
import type { AgentMachine } from '../../machines/agent.machine.js';
import { isRewirableMachine } from '../agent/protocol/executor.js';
import { defaultPrompt, TaskInput } from '../agent/subagents/agent-tool.js';
import { LoopchartError } from '../errors.js';
import { parseOptions } from '../known-keys.js';
import { defineTool } from '../tools/define-tool.js';
import { InvalidToolError } from '../tools/errors.js';
import type { JsonSchema } from '../tools/json-schema.js';


/**
 * `createMcpServer`, `serveStdio` or `createMcpHandler` was given options it cannot serve: no
 * agent, two agents under one tool name, a schema without a JSON Schema form, a limit out of range.
 *
 * @example
 * ```ts
 * import { createMcpServer, McpServerOptionsError } from 'loopchart/mcp-server';
 * try {
 *   createMcpServer({ agents: [] });
 * } catch (error) {
 *   if (McpServerOptionsError.isInstance(error)) console.error(error.message);
 * }
 * ```
 */
export class McpServerOptionsError extends LoopchartError {
  constructor(problem: string, options?: { cause?: unknown }) {
    super('InvalidMcpServerOptions', `invalid MCP server options: ${problem}`, options);
  }
}

/**
 * One agent served as an MCP tool: the tool's name and description, and optionally its arguments'
 * schema (default `{ task: string }`), how they become the run's prompt (default the task, or the
 * arguments as JSON) and the result's schema (the tool's `outputSchema`: the answer is given as
 * `structuredContent`).
 *
 * @example
 * ```ts
 * import { z } from 'zod';
 * import type { McpAgent } from 'loopchart/mcp-server';
 *
 * const weather: McpAgent<z.ZodObject<{ city: z.ZodString }>> = {
 *   agent: machine,
 *   name: 'weather',
 *   description: 'The weather of a city.',
 *   input: z.object({ city: z.string() }),
 *   prompt: ({ city }) => `What is the weather in ${city}?`,
 *   output: z.object({ celsius: z.number() }),
 * };
 * ```
 */
export interface McpAgent<S extends z.ZodType = z.ZodType> {
  agent: AgentMachine;
  /** The tool's name: 1-64 characters of a-z, A-Z, 0-9, _ or -. */
  name: string;
  description: string;
  /** The arguments' zod 4 schema (an object); default `{ task: string }`. */
  input?: S | undefined;
  /** The run's first message from the validated arguments. */
  prompt?: ((args: z.output<S>) => string) | undefined;
  /** The answer's zod 4 schema (an object): the tool's `outputSchema`, checked before it is sent. */
  output?: z.ZodType | undefined;
}

/** An agent ready to serve: what tools/list shows and what a call needs. */
export interface ServedAgent {
  name: string;
  description: string;
  agent: AgentMachine;
  inputSchema: JsonSchema;
  outputSchema: JsonSchema | undefined;
  /** Validates a call's arguments. */
  input: z.ZodType;
  output: z.ZodType | undefined;
  prompt: (args: unknown) => string;
}

const EntrySchema = z.strictObject({
  agent: z.custom<AgentMachine>(isRewirableMachine, { error: 'agent must be an agent machine (createAgentMachine)' }),
  name: z.string(),
  description: z.string(),
  input: z.custom<z.ZodType>((value) => value instanceof z.ZodType, { error: 'input must be a zod 4 schema' }).optional(),
  prompt: z.custom<(args: unknown) => string>((value) => typeof value === 'function', { error: 'prompt must be a function' }).optional(),
  output: z.custom<z.ZodType>((value) => value instanceof z.ZodType, { error: 'output must be a zod 4 schema' }).optional(),
});

/** Checks the agents once, when the server is made: every tool name once, every schema with a JSON Schema form. */
export function servedAgents(agents: readonly McpAgent<z.ZodType<any>>[]): Map<string, ServedAgent> {
  if (!Array.isArray(agents) || agents.length === 0) throw new McpServerOptionsError('agents must list at least one agent');
  const served = new Map<string, ServedAgent>();
  for (const [index, given] of agents.entries()) {
    // Strict: an unknown key names the closest known one.
    const entry = parseOptions(EntrySchema, given, `agents[${index}]`, (message) => new McpServerOptionsError(message));
    if (served.has(entry.name)) throw new McpServerOptionsError(`two agents are named '${entry.name}': tool names must be unique`);
    const input = entry.input ?? TaskInput;
    let inputSchema: JsonSchema;
    try {
      // defineTool holds the rules a tool's name and arguments' schema must meet; its definition is what tools/list shows.
      inputSchema = defineTool({ name: entry.name, description: entry.description, input, execute: () => undefined }).definition.inputSchema;
    } catch (error) {
      if (InvalidToolError.isInstance(error)) throw new McpServerOptionsError(`agents[${index}]: ${error.message}`, { cause: error });
      throw error;
    }
    served.set(entry.name, {
      name: entry.name,
      description: entry.description,
      agent: entry.agent,
      inputSchema,
      outputSchema: entry.output && outputSchemaOf(entry.name, entry.output),
      input,
      output: entry.output,
      prompt: entry.prompt ?? defaultPrompt,
    });
  }
  return served;
}

/** MCP wants an object schema for `outputSchema` (structured content is an object). */
function outputSchemaOf(name: string, output: z.ZodType): JsonSchema {
  let schema: JsonSchema;
  try {
    schema = { ...z.toJSONSchema(output, { io: 'output' }) };
  } catch (error) {
    throw new McpServerOptionsError(`agent '${name}': its output schema has no JSON Schema form (${(error as Error).message})`, { cause: error });
  }
  if (schema.type !== 'object') throw new McpServerOptionsError(`agent '${name}': its output schema must describe an object (MCP structured content is an object)`);
  delete schema.$schema;
  return schema;
}
