/** Agent settings with a wrong type or out of range: refused when the agent is made, never inside a run. */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { InvalidConfigError } from '../../../src/errors.js';
import { runAgent } from '../../../src/agent/hosts/run-agent.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { defineTool } from '../../../src/tools/define-tool.js';

const echo = defineTool({ name: 'echo', description: 'Echoes x.', input: z.object({ x: z.string() }), execute: async ({ x }) => x });
const model = () => scriptedModel([{ toolCalls: [{ name: 'echo', args: { x: 'a' } }] }, { text: 'done' }]);

describe('agent settings checked when the agent is made', () => {
  it('toolConcurrency that is no positive integer is an InvalidConfigError naming it', async () => {
    // Before: 0 and -1 were accepted and every tool call stayed queued (runAgent never settled);
    // NaN threw a RangeError from setMaxListeners as the IO started; 1.5 and '2' ran as if valid.
    for (const toolConcurrency of [0, -1, 1.5, Number.NaN, '2']) {
      expect(() => createAgentMachine({ model: model(), tools: [echo], toolConcurrency: toolConcurrency as never })).toThrow(InvalidConfigError);
      expect(() => createAgentMachine({ model: model(), tools: [echo], toolConcurrency: toolConcurrency as never })).toThrow(/toolConcurrency must be a positive integer/);
      await expect(runAgent({ model: model(), tools: [echo], prompt: 'hi', toolConcurrency: toolConcurrency as never })).rejects.toThrow(InvalidConfigError);
    }
    const result = await runAgent({ model: model(), tools: [echo], prompt: 'hi', toolConcurrency: 1 });
    expect(result.outcome.type).toBe('Completed');
  }, 10_000);

  it('a clock that is no function is an InvalidConfigError naming it', async () => {
    // Before: accepted, then runAgent failed with a raw TypeError 'agent.clock is not a function' as the run started.
    for (const clock of ['now', 5, {}]) {
      expect(() => createAgentMachine({ model: model(), clock: clock as never })).toThrow(InvalidConfigError);
      expect(() => createAgentMachine({ model: model(), clock: clock as never })).toThrow(/clock must be a function/);
      await expect(runAgent({ model: model(), tools: [echo], prompt: 'hi', clock: clock as never })).rejects.toThrow(InvalidConfigError);
    }
  });

  it('tools that are no list of tools are an InvalidConfigError naming them', async () => {
    // Before: accepted, then runAgent failed with a raw TypeError "Cannot read properties of undefined (reading 'name')".
    for (const [tools, problem] of [
      ['echo', /tools must be a list of tools/],
      [[5], /tools\[0\] must be a tool/],
      [[echo, {}], /tools\[1\] must be a tool/],
      [[{ name: 'x' }], /tools\[0\] must be a tool/],
    ] as const) {
      expect(() => createAgentMachine({ model: model(), tools: tools as never })).toThrow(InvalidConfigError);
      expect(() => createAgentMachine({ model: model(), tools: tools as never })).toThrow(problem);
      await expect(runAgent({ model: model(), prompt: 'hi', tools: tools as never })).rejects.toThrow(InvalidConfigError);
    }
  });

  it('toolSources that are no list of sources are an InvalidConfigError naming them', async () => {
    // Before: a string threw a raw TypeError 'sources.map is not a function' at creation; [5] was accepted and each run Failed.
    for (const [toolSources, problem] of [
      ['mcp', /toolSources must be a list of tool sources/],
      [[5], /toolSources\[0\] must be a tool source/],
      [[{ name: 'docs' }], /toolSources\[0\] must be a tool source/],
    ] as const) {
      expect(() => createAgentMachine({ model: model(), toolSources: toolSources as never })).toThrow(InvalidConfigError);
      expect(() => createAgentMachine({ model: model(), toolSources: toolSources as never })).toThrow(problem);
      await expect(runAgent({ model: model(), prompt: 'hi', toolSources: toolSources as never })).rejects.toThrow(InvalidConfigError);
    }
  });

  it('a compactor, pruner or executor that is no function is an InvalidConfigError naming it', async () => {
    // Before: compactor 'x' and pruner 'x' were accepted and never called (no compaction, silently); executor 'x' failed every run.
    for (const name of ['compactor', 'pruner', 'executor']) {
      expect(() => createAgentMachine({ model: model(), [name]: 'x' } as never)).toThrow(new RegExp(`${name} must be a function`));
      await expect(runAgent({ model: model(), tools: [echo], prompt: 'hi', [name]: 'x' } as never)).rejects.toThrow(InvalidConfigError);
    }
  });
});
