import type { ToolDefinition } from '../model.js';
import { defineTool, hasApprovalRule, ToolSet, type Tool } from './define-tool.js';
import { InvalidConfigError, LoopchartError } from '../errors.js';
import { DuplicateToolError, InvalidToolError } from './errors.js';
import { MAX_SOURCE_NAME_CHARS, type ToolSource } from './tool-source.js';

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
 * How a `toolset` step records the source of a tool: its `name`, or the index in `toolSources`
 * of a source without one (and in sessions recorded before names were).
 */
export type SourceRef = string | number;

/**
 * Each source's ref, checked: a name is a string of 1 to 100 characters, and unique among the
 * sources, since a restored run finds each recorded tool's source by it. Called when the agent
 * is built (an `InvalidConfigError` then) and at each listing.
 */
export function sourceRefs(sources: readonly ToolSource[]): SourceRef[] {
  // Checked here, as the agent is made: a string threw a raw TypeError, a list holding no source failed each run.
  if (!Array.isArray(sources)) throw new InvalidConfigError(`toolSources must be a list of tool sources (mcpTools), got ${typeof sources}`);
  const seen = new Map<string, number>();
  return sources.map((source, index) => {
    if (typeof source !== 'object' || source === null || typeof source.listTools !== 'function') {
      throw new InvalidConfigError(`toolSources[${index}] must be a tool source (mcpTools) with listTools()`);
    }
    const { name } = source;
    if (name === undefined) return index;
    if (typeof name !== 'string' || name.length === 0 || name.length > MAX_SOURCE_NAME_CHARS) {
      throw new InvalidConfigError(`toolSources[${index}].name must be a string of 1 to ${MAX_SOURCE_NAME_CHARS} characters`);
    }
    const first = seen.get(name);
    if (first !== undefined) {
      throw new InvalidConfigError(
        `toolSources[${first}] and toolSources[${index}] are both named '${name}', so a restored run could not tell which of them listed a tool: give each source a name of its own (mcpTools: its name option)`,
      );
    }
    seen.set(name, index);
    return name;
  });
}

const describeSource = (ref: SourceRef): string => (typeof ref === 'string' ? `tool source '${ref}'` : `toolSources[${ref}] (no name)`);

/**
 * The agent's own tools plus what its sources list now, as one set; `sources` gives, for each
 * listed tool, its source's ref. A name given twice fails with a `DuplicateToolError` naming
 * who gives it (the agent's own tools, which source), not only the name.
 */
export async function listSources(
  own: ToolSet,
  sources: readonly ToolSource[],
  signal: AbortSignal,
): Promise<{ all: ToolSet; listed: Tool[]; sources: SourceRef[] }> {
  const refs = sourceRefs(sources);
  const listings = await Promise.all(sources.map((source) => source.listTools(signal)));
  const givers = new Map<string, string>([...own].map((tool) => [tool.name, "one of the agent's own tools"]));
  for (const [index, tools] of listings.entries()) {
    const here = `by ${describeSource(refs[index]!)}`;
    for (const tool of tools) {
      // The chart decides which calls need a human from the tools it was built with.
      if (hasApprovalRule(tool)) {
        throw new InvalidToolError(tool.name, 'a tool from a tool source cannot need approval; give it in `tools` instead');
      }
      const other = givers.get(tool.name);
      if (other !== undefined) {
        const who = other === here ? `listed ${here} twice` : `listed ${here} and ${other}`;
        throw new DuplicateToolError(tool.name, `${who}; give the source's tools a prefix (mcpTools' prefix option)`);
      }
      givers.set(tool.name, here);
    }
  }
  const listed = listings.flat();
  return { all: new ToolSet([...own, ...listed]), listed, sources: listings.flatMap((tools, index) => tools.map(() => refs[index]!)) };
}

/** A listing's definitions as plain JSON, for the step's record. */
export const plainDefinitions = (tools: readonly Tool[]): ToolDefinition[] =>
  tools.map(({ definition: { name, description, inputSchema } }) => ({ name, description, inputSchema: structuredClone(inputSchema) }));

/**
 * Runnable tools for a recorded set, in a process that did not make the listing: the sources are
 * listed again (not journaled: the record already says what the run offers) and each recorded
 * tool is found on the source that listed it (`recorded`, its ref per definition), in its
 * listing now, else from its `toolFor`, else its calls are refused (an `UnresolvedTool` error
 * result saying why). A tool is never taken from another source, and one source's failed
 * listing touches only its own tools.
 *
 * A source recorded by name is the source of that name now, wherever it stands in `sources`;
 * none of that name: refused. A source recorded by position (one without a name, or a session
 * of an older build) cannot be checked by name, so the position is used only where nothing
 * contradicts it: the tool is found there when that source is the only one that lists it now
 * (or, none listing it, the only one whose `toolFor` claims it); another source listing or
 * claiming it means the sources may have been reordered, and the call is refused. A set recorded
 * before sources were (`recorded` absent) finds each tool on the one source that lists it now,
 * else the one that claims it; several: refused.
 */
export async function resolveOffered(
  own: ToolSet,
  sources: readonly ToolSource[],
  offered: readonly ToolDefinition[],
  signal: AbortSignal,
  recorded?: readonly SourceRef[] | undefined,
): Promise<ToolSet> {
  const refs = sourceRefs(sources);
  const byName = new Map<string, number>();
  for (const [index, ref] of refs.entries()) if (typeof ref === 'string') byName.set(ref, index);
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
    const ref = recorded?.[index];
    if (typeof ref !== 'string') return unnamed(sources, refs, listings, definition, ref);
    const at = byName.get(ref);
    if (at === undefined) {
      const names = refs.filter((other) => typeof other === 'string').map((name) => `'${name}'`);
      return refused(definition, `the tool source named '${ref}' that listed it is not among this agent's (${names.length ? `its named sources: ${names.join(', ')}` : 'it has no named source'})`);
    }
    return listings[at]!.tools.get(definition.name) ?? sources[at]!.toolFor?.(definition) ?? refused(definition, notProvided(listings[at]!));
  });
  return new ToolSet([...own, ...resolved]);
}

interface Listing {
  tools: Map<string, Tool>;
  error?: unknown;
}

const notProvided = (listing: Listing): string =>
  'error' in listing ? `listing its source failed: ${(listing.error as Error)?.message ?? String(listing.error)}` : 'its source no longer provides it';

/**
 * A tool recorded by its source's position (`position`), or with no source at all: found where
 * exactly one source has it now, and that one at the position when one was recorded.
 */
function unnamed(sources: readonly ToolSource[], refs: readonly SourceRef[], listings: readonly Listing[], definition: ToolDefinition, position: number | undefined): Tool {
  if (position !== undefined && !sources[position]) {
    return refused(definition, `the run recorded it from toolSources[${position}], and this agent has ${sources.length} tool sources`);
  }
  const listers = indexesOf(listings, (listing) => listing.tools.has(definition.name));
  const claims = listers.length ? [] : sources.map((source) => source.toolFor?.(definition));
  const found = listers.length ? listers : indexesOf(claims, (tool) => tool !== undefined);
  const [only] = found;
  if (only !== undefined && found.length === 1 && (position === undefined || only === position)) return listings[only]!.tools.get(definition.name) ?? claims[only]!;
  const how = (count: number): string => (listers.length === 0 ? 'could take it' : count > 1 ? 'list it now' : 'lists it now');
  if (position !== undefined) {
    if (found.length === 0) return refused(definition, notProvided(listings[position]!));
    const others = found.filter((index) => index !== position).map((index) => describeSource(refs[index]!));
    const why = `the run recorded its source by position (toolSources[${position}]), and ${others.join(', ')} ${how(others.length)}`;
    return refused(definition, `${why}: the sources may have been reordered since, so no source is called (give each source a name)`);
  }
  if (found.length > 1) return refused(definition, `this run was recorded without the source of each tool, and ${found.length} sources ${how(found.length)}`);
  const failed = listings.find((listing) => 'error' in listing);
  return refused(definition, failed ? notProvided(failed) : 'its source no longer provides it');
}

const indexesOf = <T>(items: readonly T[], test: (item: T) => boolean): number[] => items.flatMap((item, index) => (test(item) ? [index] : []));

/** A recorded tool this process cannot call on its source: its calls are accepted and answered with this error. */
function refused(definition: ToolDefinition, why: string): Tool {
  return defineTool({
    name: definition.name,
    description: definition.description,
    inputSchema: definition.inputSchema,
    execute: () => {
      throw new LoopchartError('UnresolvedTool', `tool '${definition.name}' was offered to this run, but ${why}`);
    },
  });
}
