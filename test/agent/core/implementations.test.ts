/**
 * The chart's guards, actions and delays come from one record per feature (issue 39, point 2):
 * the core loop's and each slice's `implementations.ts`. The chart spreads them, so a name two
 * slices both defined would silently take the later one: each name must come from exactly one,
 * and together they give every name the chart's machine carries.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { approvalImplementations } from '../../../src/agent/approvals/implementations.js';
import { budgetImplementations } from '../../../src/agent/budget/implementations.js';
import { cancelImplementations } from '../../../src/agent/cancel/implementations.js';
import type { AgentConfig } from '../../../src/agent/core/config.js';
import { coreImplementations } from '../../../src/agent/core/implementations.js';
import { fallbackImplementations } from '../../../src/agent/fallback/implementations.js';
import { guardrailImplementations } from '../../../src/agent/guardrails/implementations.js';
import { handoffImplementations } from '../../../src/agent/handoffs/implementations.js';
import { inDoubtImplementations } from '../../../src/agent/in-doubt/implementations.js';
import { operationImplementations } from '../../../src/agent/operations/implementations.js';
import { repetitionImplementations } from '../../../src/agent/repetition/implementations.js';
import { structuredOutputImplementations } from '../../../src/agent/structured-output/implementations.js';
import { subagentImplementations } from '../../../src/agent/subagents/implementations.js';
import { tracingImplementations } from '../../../src/agent/tracing/implementations.js';
import { scriptedModel } from '../../../src/testing.js';
import { defineTool } from '../../../src/tools/define-tool.js';

const slices = {
  core: coreImplementations,
  approvals: approvalImplementations,
  budget: budgetImplementations,
  cancel: cancelImplementations,
  fallback: fallbackImplementations,
  guardrails: guardrailImplementations,
  handoffs: handoffImplementations,
  'in-doubt': inDoubtImplementations,
  operations: operationImplementations,
  repetition: repetitionImplementations,
  'structured-output': structuredOutputImplementations,
  subagents: subagentImplementations,
  tracing: tracingImplementations,
};

const kinds = ['guards', 'actions', 'delays'] as const;

describe('the chart implementations, one record per slice', () => {
  const config: AgentConfig = {
    model: scriptedModel([{ text: 'hi' }]),
    tools: [defineTool({ name: 'danger', description: 'asks', input: z.object({}), needsApproval: true, execute: () => 'done' })],
  };

  it('each guard, action and delay comes from exactly one slice', () => {
    for (const kind of kinds) {
      const owners = new Map<string, string[]>();
      for (const [slice, of] of Object.entries(slices)) {
        const record = (of as Partial<Record<(typeof kinds)[number], object>>)[kind] ?? {};
        for (const name of Object.keys(record)) owners.set(name, [...(owners.get(name) ?? []), slice]);
      }
      const shared = [...owners].filter(([, by]) => by.length > 1).map(([name, by]) => `${kind} ${name}: ${by.join(', ')}`);
      expect(shared).toEqual([]);
    }
  });

  it('together they are every name the machine carries, and nothing else', () => {
    const machine = createAgentMachine(config);
    for (const kind of kinds) {
      const names = Object.entries(slices).flatMap(([, of]) => Object.keys((of as Partial<Record<(typeof kinds)[number], object>>)[kind] ?? {}));
      // The chart composes beginRun from the core's and each slice's `runStart`, rejectEvent from their `refusal`.
      if (kind === 'actions') names.push('beginRun', 'rejectEvent');
      expect(names.sort(), kind).toEqual(Object.keys(machine.implementations[kind]).sort());
    }
  });

  it('a feature brings the IO handlers of its own request types, and no two bring the same', () => {
    const owners = new Map<string, string[]>();
    for (const [slice, of] of Object.entries(slices)) {
      for (const type of Object.keys((of as { io?: object }).io ?? {})) owners.set(type, [...(owners.get(type) ?? []), slice]);
    }
    expect(Object.fromEntries(owners)).toEqual({ operation: ['operations'], approvals: ['approvals'], guardrails: ['guardrails'], forward: ['subagents'] });
  });
});
