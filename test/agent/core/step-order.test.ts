/**
 * The driver's decision order is the tables in src/agent/core/step-order.ts: the chart XState
 * builds follows them branch for branch, and no eventless list of the chart is longer than 8
 * (before the split, `Start` held 20 branches).
 */
import type { AnyStateNode } from 'xstate';
import { describe, expect, it } from 'vitest';
import { wholeChart } from '../../../machines/agent.machine.js';
import { stepOrder, type Branch } from '../../../src/agent/core/step-order.js';

// The whole chart: an agent runs its variant, without the branches of features it lacks (chart-variant.test.ts).
const machine = wholeChart();

const nodes = (node: AnyStateNode): AnyStateNode[] => [node, ...Object.values(node.states).flatMap(nodes)];
const guardName = (guard: unknown) => (guard === undefined ? undefined : typeof guard === 'string' ? guard : (guard as { type: string }).type);
const targetName = (branch: Branch) => (branch.target.startsWith('#agent.') ? branch.target.slice('#agent.'.length) : `Running.${branch.target}`);

describe('the decision order', () => {
  for (const [state, table] of Object.entries(stepOrder)) {
    it(`Running.${state} takes its branches in the order of its table`, () => {
      const node = machine.getStateNodeById(`agent.Running.${state}`);
      const chart = node.always!.map((t) => ({ guard: guardName(t.guard), targets: (t.target ?? []).map((n) => n.path.join('.')) }));
      const expected = (table as readonly Branch[]).map((branch) => ({ guard: branch.guard, targets: [targetName(branch)] }));
      expect(chart).toEqual(expected);
    });
  }

  it('every table ends with its default and says why each branch sits where it does', () => {
    for (const table of Object.values(stepOrder) as (readonly Branch[])[]) {
      expect(table.at(-1)!.guard).toBeUndefined();
      expect(table.slice(0, -1).every((branch) => branch.guard)).toBe(true);
      expect(table.every((branch) => branch.why.length > 10)).toBe(true);
    }
  });

  it('no eventless list of the chart is longer than 8', () => {
    const longest = Math.max(...nodes(machine.root).map((node) => node.always?.length ?? 0));
    expect(longest).toBeLessThanOrEqual(8);
  });
});
