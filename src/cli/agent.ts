import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createAgentMachine, type AgentMachine } from '../../machines/agent.machine.js';
import type { AgentConfig } from '../agent/config.js';
import { CliError } from './errors.js';

/**
 * The agent a resumed run continues with: the one in `--agent <module>` (its export `agent`, or
 * its default export: an AgentConfig, or a function returning one), else the demo's folder agent
 * (`examples/folder-agent.ts`: list_dir / read_file / calculator over examples/fixtures, on the
 * scripted model unless OPENAI_BASE_URL names a real endpoint).
 *
 * A run continues with whatever config it is given: resume a session with the tools it was
 * started with, or its pending calls answer "unknown tool".
 */
export async function loadAgentMachine(modulePath: string | undefined): Promise<{ machine: AgentMachine; name: string }> {
  if (!modulePath) {
    const { createFolderAgent } = await import('../../examples/folder-agent.js');
    return { machine: createFolderAgent().machine, name: 'the demo folder agent (examples/folder-agent.ts)' };
  }
  const url = pathToFileURL(resolve(modulePath)).href;
  let module: Record<string, unknown>;
  try {
    module = (await import(url)) as Record<string, unknown>;
  } catch (error) {
    throw new CliError(`cannot load the agent module ${modulePath}: ${(error as Error).message}`, { cause: error });
  }
  let config = module.agent ?? module.default;
  if (typeof config === 'function') config = await (config as () => unknown)();
  if (!config || typeof config !== 'object' || !('model' in config)) {
    throw new CliError(`${modulePath} must export \`agent\`: an AgentConfig ({ model, tools, ... }) or a function returning one`);
  }
  return { machine: createAgentMachine(config as AgentConfig), name: modulePath };
}
