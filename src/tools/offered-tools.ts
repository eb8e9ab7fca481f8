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

/**
 * The agent's own tools plus what its sources list now, as one set (a name given twice fails);
 * `sources` gives, for each listed tool, the index of the source that listed it (in `sources`).
 */
export async function listSources(
  own: ToolSet,
  sources: readonly ToolSource[],
  signal: AbortSignal,
): Promise<{ all: ToolSet; listed: Tool[]; sources: number[] }> {
  const listings = await Promise.all(sources.map((source) => source.listTools(signal)));
  const listed = listings.flat();
  for (const tool of listed) {
    // The chart decides which calls need a human from the tools it was built with.
    if (hasApprovalRule(tool)) {
      throw new InvalidToolError(tool.name, 'a tool from a tool source cannot need approval; give it in `tools` instead');
    }
  }
  return { all: new ToolSet([...own, ...listed]), listed, sources: listings.flatMap((tools, index) => tools.map(() => index)) };
}

/** A listing's definitions as plain JSON, for the step's record. */
export const plainDefinitions = (tools: readonly Tool[]): ToolDefinition[] =>
  tools.map(({ definition: { name, description, inputSchema } }) => ({ name, description, inputSchema: structuredClone(inputSchema) }));

/**
 * Runnable tools for a recorded set, in a process that did not make the listing: the sources are
 * listed again (not journaled: the record already says what the run offers) and each recorded
 * tool is found on the source that listed it (`sourceOf`, the index recorded with the set): in
 * its listing now, else from its `toolFor`, else its calls are answered with an error saying so.
 * A tool is never taken from another source, and one source's failed listing touches only its
 * own tools. A set recorded before sources were recorded (`sourceOf` absent) finds each tool in
 * the one listing that has it now, else from the one source whose `toolFor` claims it; claimed by
 * several (a source without a prefix claims every name), its calls are answered with an error.
 */
export async function resolveOffered(
  own: ToolSet,
  sources: readonly ToolSource[],
  offered: readonly ToolDefinition[],
  signal: AbortSignal,
  sourceOf?: readonly number[] | undefined,
): Promise<ToolSet> {
  const listings = await Promise.all(
    sources.map(async (source): Promise<Listing> => {
      try {
        return { tools: new Map((await source.listTools(signal)).map((tool) => [tool.name, tool])) };
      } catch (error) {
        if (signal.aborted) throw error;
        return { tools: new Map(), error };
      }
    }),
  );
  const resolved = offered.map((definition, index) => {
    const recorded = sourceOf?.[index];
    if (recorded !== undefined) {
      const source = sources[recorded];
      const listing = listings[recorded];
      if (!source || !listing) return gone(definition, `the agent has no tool source #${recorded} (the run recorded it from that source)`);
      return listing.tools.get(definition.name) ?? source.toolFor?.(definition) ?? gone(definition, notProvided(listing));
    }
    return unrecorded(sources, listings, definition);
  });
  return new ToolSet([...own, ...resolved]);
}

interface Listing {
  tools: Map<string, Tool>;
  error?: unknown;
}

const notProvided = (listing: Listing): string =>
  'error' in listing ? `listing its source failed: ${(listing.error as Error)?.message ?? String(listing.error)}` : 'its source no longer provides it';

/** A tool of a set recorded without its sources: found where only one source can have it. */
function unrecorded(sources: readonly ToolSource[], listings: readonly Listing[], definition: ToolDefinition): Tool {
  const listing = listings.find((candidate) => candidate.tools.has(definition.name));
  if (listing) return listing.tools.get(definition.name)!;
  const claimed = sources.map((source) => source.toolFor?.(definition)).filter((tool): tool is Tool => tool !== undefined);
  if (claimed.length === 1) return claimed[0]!;
  const failed = listings.filter((candidate) => 'error' in candidate);
  if (claimed.length > 1) {
    return gone(definition, `this run was recorded without the source of each tool, no source lists it now and ${claimed.length} sources could take it`);
  }
  return gone(definition, failed.length ? notProvided(failed[0]!) : 'its source no longer provides it');
}

/** A recorded tool nothing provides now: its calls are accepted and answered with this error. */
function gone(definition: ToolDefinition, why: string): Tool {
  return defineTool({
    name: definition.name,
    description: definition.description,
    inputSchema: definition.inputSchema,
    execute: () => {
      throw new Error(`tool '${definition.name}' was offered to this run, but ${why}`);
    },
  });
}
