import type { ToolDefinition } from '../model.js';
import type { Tool } from './define-tool.js';

/**
 * Tools that may change between runs, such as an MCP server's (`mcpTools` from `loopchart/mcp`
 * is one). An agent asks each of its sources for their tools once per run, before the run's
 * first model call, and the run keeps that set to its end: the model is offered, and the runner
 * runs, the tools of that listing. A listing that fails fails the run's model step. The listing
 * is a recorded step of the run (side effect kind `toolset` through the executor: journaled by
 * `DurableSession`, a durable step under Restate, kept in an `AgentStepper` snapshot), so a run
 * continued in another process offers and accepts the same tools. The record says which source
 * listed each tool: its `name`, so the restored agent may give its sources in any order (a
 * source without a name is recorded by its index in `toolSources`, and found there only when no
 * other source lists or claims the tool). To run a call there, the sources are listed again (not
 * recorded) and the tool is found on the source that listed it, never on another; a tool that
 * source no longer lists (or whose listing fails) comes from its `toolFor`; without it, or when
 * no source has the recorded name, the call is answered with an error result (code
 * `UnresolvedTool`).
 *
 * @example
 * ```ts
 * import { createAgentMachine, defineTool, type ToolSource } from 'loopchart';
 * import { z } from 'zod';
 *
 * const clock: ToolSource = {
 *   // What a run records as the source of its tools: a restored run finds the source by it.
 *   name: 'clock',
 *   // Listed afresh at every run's start: today's tools.
 *   async listTools() {
 *     const today = new Date().toISOString().slice(0, 10);
 *     return [defineTool({ name: 'today', description: 'Today\'s date.', input: z.object({}), execute: () => today })];
 *   },
 * };
 * const agent = createAgentMachine({ model, toolSources: [clock] });
 * ```
 */
export interface ToolSource {
  /**
   * What the run's record calls this source (1 to 100 characters, unique among an agent's
   * sources: two of one name are an `InvalidConfigError` when the agent is built). Keep it the
   * same across deploys: a restored run calls each recorded tool on the source of this name.
   * `mcpTools` handles have one (its `name` option, else the server's own name and the prefix).
   */
  readonly name?: string | undefined;
  /**
   * The tools for the run that starts. `signal` aborts when the run no longer needs the answer.
   * Approval rules are read when the agent is built, so a listed tool may not set `needsApproval`
   * (give such a tool in `tools`).
   */
  listTools(signal: AbortSignal): Promise<readonly Tool[]>;
  /**
   * A runnable tool for a definition a run recorded from an earlier listing, when the source no
   * longer lists it (`mcpTools` calls the server by the recorded name). Asked only for the tools
   * this source listed (in a session that recorded positions or no sources, for any tool no
   * listing has, and used only when no other source claims it). Undefined: the call is answered
   * with an error result.
   */
  toolFor?(definition: ToolDefinition): Tool | undefined;
}

/** The longest `ToolSource.name`: it is recorded with every tool the source lists. */
export const MAX_SOURCE_NAME_CHARS = 100;
