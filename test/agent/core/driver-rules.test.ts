/**
 * The driver's rules and actions without the machine: compileAgent's frozen result, and pure
 * functions of (agent, context, event) that return what the chart applies.
 */
import { describe, expect, it } from 'vitest';
import { compileAgent } from '../../../src/agent/core/compile.js';
import { freshAgentContext, type AgentContext } from '../../../src/agent/core/context.js';
import * as act from '../../../src/agent/core/implementations.js';
import { modelKey, resetBatch } from '../../../src/agent/core/driver-rules.js';
import { overBudget } from '../../../src/agent/budget/implementations.js';
import { InvalidConfigError } from '../../../src/errors.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { PolicySchema } from '../../../src/schemas.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { z } from 'zod';

const model = () => scriptedModel([{ text: 'hi' }]);
const fresh = (sessionId = 's1'): AgentContext => freshAgentContext({ sessionId, history: [], policy: PolicySchema.parse({}), queued: null });
const danger = defineTool({ name: 'danger', description: 'needs a person', input: z.object({}), needsApproval: true, execute: () => 'done' });
const safe = defineTool({ name: 'safe', description: 'runs at once', input: z.object({}), execute: () => 'done' });

describe('compileAgent', () => {
  it('checks a config once and returns a frozen value', () => {
    const agent = compileAgent({ model: model(), tools: [safe] });
    expect(Object.isFrozen(agent)).toBe(true);
    expect(agent.tools.names).toEqual(['safe']);
    expect(agent.gated).toBe(false);
    expect(() => compileAgent({ model: model(), maxToolCallsPerReply: 0 })).toThrow(InvalidConfigError);
  });

  it('a tool with an approval rule gates the batch', () => {
    expect(compileAgent({ model: model(), tools: [danger] }).gated).toBe(true);
  });
});

describe('driver actions', () => {
  it('beginRun starts run 1 with the message pending and the batch cleared', () => {
    const agent = compileAgent({ model: model() });
    const change = act.beginRun(agent, fresh(), { type: 'input', message: 'hello' } as never);
    expect(change.runIndex).toBe(1);
    expect(change.brain!.context.pending).toEqual([{ role: 'user', content: 'hello' }]);
    expect(change).toMatchObject(resetBatch(agent, fresh()));
  });

  it('requestModel asks for the next turn under its own key, with the agent’s tools', () => {
    const agent = compileAgent({ model: model(), tools: [safe] });
    const context = { ...fresh('team'), ...act.beginRun(agent, fresh('team'), { type: 'input', message: 'hi' } as never) };
    const request = act.requestModel(agent, context, { type: 'resume' } as never);
    expect(request).toMatchObject({ type: 'model', key: modelKey(context), turn: 1, sessionId: 'team' });
    expect(request.type === 'model' && request.tools.map((tool) => tool.name)).toEqual(['safe']);
  });
});

describe('driver rules', () => {
  it('overBudget seals nothing without a budget', () => {
    const agent = compileAgent({ model: model() });
    expect(overBudget(agent, fresh())).toBeNull();
  });
});
