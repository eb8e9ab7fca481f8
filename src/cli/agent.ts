import { existsSync } from 'node:fs';
import { extname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createAgentMachine, type AgentMachine } from '../../machines/agent.machine.js';
import type { AgentConfig } from '../agent/core/config.js';
import { CliError } from './errors.js';
import { escapeLine } from './escape.js';
import { cliHint } from './hint.js';

/** Session ids the demo (`npm start`) gives its sessions: the record of which agent made them. */
export const DEMO_SESSION_PREFIX = 'demo-';

const TYPESCRIPT = new Set(['.ts', '.mts', '.cts']);

const DEMO_AGENT_MODULE = new URL('../../examples/folder-agent.ts', import.meta.url);

/**
 * The agent a resumed (or continued: `send`) run goes on with: the one in `--agent <module>` (its export `agent`, or
 * its default export: an AgentConfig, or a function returning one). Without `--agent` only a
 * session the demo made (id `demo-…`) may continue, with the demo's folder agent: any other
 * session would get a nonsense run committed by an agent that never saw it.
 *
 * A run continues with whatever config it is given: resume a session with the tools it was
 * started with, or its pending calls answer "unknown tool".
 */
export async function loadAgentMachine(
  modulePath: string | undefined,
  sessionId: string,
  command: 'resume' | 'send' = 'resume',
): Promise<{ machine: AgentMachine; name: string }> {
  if (!modulePath) {
    if (!sessionId.startsWith(DEMO_SESSION_PREFIX)) {
      const id = escapeLine(sessionId);
      const next = command === 'send' ? `send ${id} "…"` : `resume ${id}`;
      throw new CliError(
        `session ${id} was not made by the demo agent, so it will not be ${command === 'send' ? 'continued' : 'resumed'} with it. ` +
          `Name the agent that made it: ${cliHint(`sessions ${next} --agent ./agent.ts`)} ` +
          '(a module exporting `agent`: an AgentConfig, or a function returning one)',
        { exitCode: 2 },
      );
    }
    return { machine: await demoAgentMachine(), name: 'the demo folder agent (examples/folder-agent.ts)' };
  }
  const module = await importAgentModule(modulePath);
  const config = await agentConfigOf(exportOf(module, 'agent') ?? module.default, `${modulePath} must export \`agent\``);
  return { machine: createAgentMachine(config), name: modulePath };
}

/**
 * A module's export `name`: its own, else the property `name` of its CommonJS exports object.
 * Node's `import()` of a CommonJS module (a .cjs file, a .js outside a "type": "module" package)
 * gives `module.exports` as `default`, and as named exports only the names it finds by reading
 * the source: `module.exports = { agent: build() }` or `= build()` have none. An ES module's own
 * export is read first, so which of its exports wins does not change.
 *
 * @example
 * ```ts
 * const module = await importAgentModule('./agent.cjs');
 * const agent = exportOf(module, 'agent') ?? module.default;
 * ```
 */
export function exportOf(module: Record<string, unknown>, name: string): unknown {
  if (module[name] !== undefined) return module[name];
  const exports = module.default;
  return exports !== null && typeof exports === 'object' && Object.hasOwn(exports, name) ? (exports as Record<string, unknown>)[name] : undefined;
}

/**
 * An agent a module exports: an AgentConfig, or a function returning one (called here). Anything
 * else is a `CliError` that starts with `what` (which module, which export); so is a function that
 * throws, named with `what` too: it was "unexpected error: Error: …", naming no module.
 */
export async function agentConfigOf(exported: unknown, what: string): Promise<AgentConfig> {
  let config: unknown;
  try {
    config = typeof exported === 'function' ? await (exported as () => unknown)() : exported;
  } catch (error) {
    throw new CliError(`${what}: an AgentConfig or a function returning one, and the function threw: ${firstLine(error)}`, { cause: error });
  }
  if (!config || typeof config !== 'object' || !('model' in config)) throw new CliError(`${what}: an AgentConfig ({ model, tools, ... }) or a function returning one`);
  return config as AgentConfig;
}

/**
 * The demo's folder agent, loaded where it is (beside the source in a checkout) at run time: the
 * library does not depend on its examples, and the installed package does not ship them.
 */
async function demoAgentMachine(): Promise<AgentMachine> {
  if (!existsSync(DEMO_AGENT_MODULE)) {
    throw new CliError(
      'the demo agent (examples/folder-agent.ts) is only in a checkout of loopchart; ' +
        'name the agent that made the session: --agent ./agent.ts',
      { exitCode: 2 },
    );
  }
  const { createFolderAgent } = (await import(DEMO_AGENT_MODULE.href)) as { createFolderAgent: () => { machine: AgentMachine } };
  return createFolderAgent().machine;
}

/**
 * Imports the agent module. A TypeScript module runs where Node strips types itself (23.6+,
 * 22.18+) or through tsx when it is installed; otherwise the error says which of those to do.
 */
export function importAgentModule(modulePath: string): Promise<Record<string, unknown>> {
  return unlessStuck(importModule(modulePath), modulePath);
}

async function importModule(modulePath: string): Promise<Record<string, unknown>> {
  const url = pathToFileURL(resolve(modulePath)).href;
  try {
    return (await import(url)) as Record<string, unknown>;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === 'ERR_UNKNOWN_FILE_EXTENSION' && TYPESCRIPT.has(extname(modulePath))) return importWithTsx(modulePath, url, error);
    throw new CliError(`cannot load the agent module ${modulePath}: ${firstLine(error)}`, { cause: error });
  }
}

/**
 * The import, or a `CliError` once nothing is left that could finish it: a module whose top-level
 * await waits on a promise nothing settles lets the event loop empty mid-import, and the process
 * ended with status 0, having printed nothing and run nothing. `beforeExit` is that moment.
 */
function unlessStuck<T>(loading: Promise<T>, modulePath: string): Promise<T> {
  let onEmpty = () => {};
  const stuck = new Promise<never>((_, reject) => {
    onEmpty = () => reject(new CliError(`the agent module ${modulePath} never finished loading: its top-level await waits on something that never settles`));
  });
  process.once('beforeExit', onEmpty);
  return Promise.race([loading, stuck]).finally(() => process.off('beforeExit', onEmpty));
}

async function importWithTsx(modulePath: string, url: string, original: unknown): Promise<Record<string, unknown>> {
  let tsImport: (specifier: string, parent: string) => Promise<unknown>;
  try {
    ({ tsImport } = (await import('tsx/esm/api')) as { tsImport: typeof tsImport });
  } catch {
    throw new CliError(
      `cannot load the agent module ${modulePath}: this Node (${process.version}) does not run TypeScript by itself. ` +
        'Do one of: install tsx next to loopchart (npm install --save-dev tsx) and run the same command again; ' +
        'run the CLI through tsx (npx tsx node_modules/loopchart/dist/cli.js sessions resume …); ' +
        'use Node 22.18 or later (or 23.6+), which runs .ts modules natively; or compile the module to .js and pass that',
      { cause: original },
    );
  }
  try {
    return (await tsImport(url, import.meta.url)) as Record<string, unknown>;
  } catch (error) {
    throw new CliError(`cannot load the agent module ${modulePath}: ${firstLine(error)}`, { cause: error });
  }
}

const firstLine = (error: unknown) => String((error as Error)?.message ?? error).split('\n')[0];
