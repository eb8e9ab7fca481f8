/**
 * An `--agent` module whose exported function throws, in process: the error names the module and
 * the export. It was "unexpected error: Error: <its message>", naming neither.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { agentConfigOf, loadAgentMachine } from '../../src/cli/agent.js';
import { CliError } from '../../src/cli/errors.js';

const dir = mkdtempSync(join(tmpdir(), 'loopchart-cli-agent-export-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('an exported agent function that throws', () => {
  it('sessions send / resume: names the module, says the function threw, and why', async () => {
    const module = join(dir, 'throws.mjs');
    writeFileSync(module, "export const agent = () => { throw new Error('OPENAI_API_KEY is not set\\nmore'); };\n");
    const failure = await loadAgentMachine(module, 'any-session', 'send').catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(CliError);
    expect((failure as Error).message).toBe(`${module} must export \`agent\`: an AgentConfig or a function returning one, and the function threw: OPENAI_API_KEY is not set`);
  });

  it('the scheduler: names the agent of `agents` whose function threw', async () => {
    const failure = await agentConfigOf(async () => Promise.reject(new TypeError('no model')), 'agents.ts: agents.reporter must be').catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(CliError);
    expect((failure as Error).message).toBe('agents.ts: agents.reporter must be: an AgentConfig or a function returning one, and the function threw: no model');
  });
});
