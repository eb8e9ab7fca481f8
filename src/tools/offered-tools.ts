import type { ToolDefinition } from '../model.js';
import { defineTool, hasApprovalRule, ToolSet, type Tool } from './define-tool.js';
import { InvalidToolError } from './errors.js';
import type { ToolSource } from './tool-source.js';

/**
 * The tool set a run was offered, as recorded by its `toolset` step, made runnable again in the
 * process that runs its calls. The recording is the truth: a tool it names is accepted even when
 * the source no longer lists it.
 */

/** Listings this process made, by their `toolset` step's key: a stepped run reuses their Tool objects. */
export class ListingCache {
  readonly #byKey = new Map<string, ToolSet>();
  constructor(readonly limit = 32) {}

  get(key: string): ToolSet | undefined {
    return this.#byKey.get(key);
  }

  set(key: string, tools: ToolSet): void {
    this.#byKey.delete(key);
    this.#byKey.set(key, tools);
    // Oldest first out: a process that serves many sessions keeps only the recent runs' tools.
    if (this.#byKey.size > this.limit) this.#byKey.delete(this.#byKey.keys().next().value!);
  }
}

/** The agent's own tools plus what its sources list now, as one set (a name given twice fails). */
export async function listSources(own: ToolSet, sources: readonly ToolSource[], signal: AbortSignal): Promise<{ all: ToolSet; listed: Tool[] }> {
  const listed = (await Promise.all(sources.map((source) => source.listTools(signal)))).flat();
  for (const tool of listed) {
    // The chart decides which calls need a human from the tools it was built with.
    if (hasApprovalRule(tool)) {
      throw new InvalidToolError(tool.name, 'a tool from a tool source cannot need approval; give it in `tools` instead');
    }
  }
  return { all: new ToolSet([...own, ...listed]), listed };
}

/** A listing's definitions as plain JSON, for the step's record. */
export const plainDefinitions = (tools: readonly Tool[]): ToolDefinition[] =>
  tools.map(({ definition: { name, description, inputSchema } }) => ({ name, description, inputSchema: structuredClone(inputSchema) }));

/**
 * Runnable tools for a recorded set, in a process that did not make the listing: the sources are
 * listed again (not journaled: the record already says what the run offers) and each recorded
 * tool is found by name; one a source no longer lists comes from the source's `toolFor`, or
 * answers its calls with an error saying so.
 */
export async function resolveOffered(own: ToolSet, sources: readonly ToolSource[], offered: readonly ToolDefinition[], signal: AbortSignal): Promise<ToolSet> {
  let current = new Map<string, Tool>();
  let listingError: unknown;
  try {
    current = new Map((await Promise.all(sources.map((source) => source.listTools(signal)))).flat().map((tool) => [tool.name, tool]));
  } catch (error) {
    if (signal.aborted) throw error;
    listingError = error;
  }
  const resolved = offered.map((definition) => current.get(definition.name) ?? fromSources(sources, definition) ?? gone(definition, listingError));
  return new ToolSet([...own, ...resolved]);
}

function fromSources(sources: readonly ToolSource[], definition: ToolDefinition): Tool | undefined {
  for (const source of sources) {
    const tool = source.toolFor?.(definition);
    if (tool) return tool;
  }
  return undefined;
}

/** A recorded tool nothing provides now: its calls are accepted and answered with this error. */
function gone(definition: ToolDefinition, listingError: unknown): Tool {
  const why = listingError === undefined ? 'its source no longer provides it' : `listing its sources failed: ${(listingError as Error)?.message ?? String(listingError)}`;
  return defineTool({
    name: definition.name,
    description: definition.description,
    inputSchema: definition.inputSchema,
    execute: () => {
      throw new Error(`tool '${definition.name}' was offered to this run, but ${why}`);
    },
  });
}
