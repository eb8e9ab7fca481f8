/**
 * The side-effect contract carries a version (issue 39, point 6), as the AI SDK's
 * `specificationVersion`: every effect names the version it is described in, and an executor
 * written against another version is refused when the agent is built, not on its first effect.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { InvalidConfigError } from '../../../src/errors.js';
import { EFFECT_SPECIFICATION_VERSION, type Executor } from '../../../src/agent/protocol/executor.js';
import { runAgent } from '../../../src/agent/hosts/run-agent.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { defineTool } from '../../../src/tools/define-tool.js';

const echo = defineTool({ name: 'echo', description: 'Echoes', input: z.object({ text: z.string() }), execute: ({ text }) => text });
const model = () => scriptedModel([{ toolCalls: [{ id: 'a', name: 'echo', args: { text: 'x' } }] }, { text: 'done' }]);

const declaring = (version: unknown): Executor =>
  Object.defineProperty(((_effect, perform) => perform()) as Executor, 'specificationVersion', { get: () => version });

describe('the side-effect contract version', () => {
  it('every effect an executor sees carries the version of the contract it is described in', async () => {
    const seen: string[] = [];
    const executor: Executor = (effect, perform) => {
      seen.push(`${effect.kind} ${effect.specificationVersion}`);
      return perform();
    };
    const { outcome } = await runAgent({ model: model(), tools: [echo], prompt: 'go', executor });
    expect(outcome.type).toBe('Completed');
    expect(seen).toEqual(['model v1', 'tool v1', 'model v1']);
    expect(EFFECT_SPECIFICATION_VERSION).toBe('v1');
  });

  it('an executor that declares this version, or none, is taken', () => {
    expect(() => createAgentMachine({ model: model(), executor: declaring('v1') })).not.toThrow();
    expect(() => createAgentMachine({ model: model(), executor: declaring(undefined) })).not.toThrow();
  });

  it('an executor from another build is refused when the agent is built, naming both versions', () => {
    const build = () => createAgentMachine({ model: model(), executor: declaring('v0') });
    expect(build).toThrow(InvalidConfigError);
    expect(build).toThrow(/contract "v0".*speaks "v1"/);
  });

  it('a version that cannot be read is refused, not thrown through', () => {
    const executor = Object.defineProperty(((_effect, perform) => perform()) as Executor, 'specificationVersion', {
      get: () => {
        throw new Error('boom');
      },
    });
    expect(() => createAgentMachine({ model: model(), executor })).toThrow(InvalidConfigError);
  });
});
