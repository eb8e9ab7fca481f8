/**
 * Every agent shares one chart and one set of implementations (issue 39, point 7): a guard or an
 * action reads the agent whose machine was asked (`inAgent`). These tests hold the rule where it
 * could break: nesting, a throw, a call from outside any machine, and the machine methods that run
 * guards outside an actor (`snapshot.can`, `machine.transition`).
 */
import { describe, expect, it } from 'vitest';
import { createActor, initialTransition, transition } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { currentAgent, inAgent } from '../../../src/agent/core/bind.js';
import { compileAgent } from '../../../src/agent/core/compile.js';
import { scriptedModel } from '../../../src/testing.js';

describe('the current agent', () => {
  const first = compileAgent({ model: scriptedModel([]), maxToolCallsPerReply: 1 });
  const second = compileAgent({ model: scriptedModel([]), maxToolCallsPerReply: 2 });

  it('is the agent whose step runs, and the outer one again after a nested step', () => {
    const seen: number[] = [];
    inAgent(first, () => {
      seen.push(currentAgent().maxCalls);
      inAgent(second, () => seen.push(currentAgent().maxCalls))();
      seen.push(currentAgent().maxCalls);
    })();
    expect(seen).toEqual([1, 2, 1]);
  });

  it('is given back when a step throws', () => {
    const failing = inAgent(second, () => {
      throw new Error('boom');
    });
    inAgent(first, () => {
      expect(failing).toThrow('boom');
      expect(currentAgent().maxCalls).toBe(1);
    })();
  });

  it('is no one outside a machine: a rule called there says so', () => {
    expect(() => currentAgent()).toThrow(/outside its agent machine/);
  });
});

describe('agents over the shared chart', () => {
  // A policy change is acceptable when its compactThreshold stays above the agent's prune line.
  const pruned = createAgentMachine({ model: scriptedModel([]), pruning: { threshold: 50 } });
  const plain = createAgentMachine({ model: scriptedModel([]) });
  const lowerThreshold = { type: 'policy', policy: { compactThreshold: 40 } } as const;

  it('say which transition an event takes with their own config, outside any transition (`getTransitionData`, as `snapshot.can` asks)', () => {
    const taken = (machine: typeof plain) => {
      const snapshot = createActor(machine).start().getSnapshot();
      expect(snapshot.can(lowerThreshold)).toBe(true);
      return machine.getTransitionData(snapshot as never, lowerThreshold).flatMap((t) => t.actions.map((action) => (typeof action === 'string' ? action : (action as { type: string }).type)));
    };
    expect(taken(pruned)).toEqual(['rejectPolicy']);
    expect(taken(plain)).toEqual(['changePolicy']);
  });

  it('compute their own transitions in turn (xstate `initialTransition`, `transition`)', () => {
    let [a] = initialTransition(pruned);
    let [b] = initialTransition(plain);
    [a] = transition(pruned, a, lowerThreshold);
    [b] = transition(plain, b, lowerThreshold);
    expect(a.context.policy.compactThreshold).not.toBe(40);
    expect(b.context.policy.compactThreshold).toBe(40);
  });
});
