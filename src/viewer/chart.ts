import type { AnyStateMachine, AnyStateNode } from 'xstate';
import { loopMachine, loopTransitions } from '../../machines/loop.machine.js';
import type { StateName } from '../schemas.js';

/**
 * A statechart as plain data for the page to draw: generated from a machine definition (its
 * state nodes and their transitions), never drawn by hand. The page lays it out by layers
 * (distance from the initial state) and highlights the current or selected state.
 */

export interface ChartState {
  /** Dotted path from the root, e.g. `Running.AwaitingModel`. */
  id: string;
  label: string;
  /** Nesting depth (0 for the root's children). */
  depth: number;
  parent: string | null;
  initial: boolean;
  final: boolean;
  /** Its children are regions, all active at once. */
  parallel: boolean;
}

export interface ChartTransition {
  from: string;
  /** The target state, or null for a transition that stays (acts without moving). */
  to: string | null;
  event: string;
  /** Guard names, all of which must hold (empty: unguarded). */
  guards: string[];
}

export interface ChartModel {
  id: string;
  states: ChartState[];
  transitions: ChartTransition[];
}

/** Names a transition's guards: from a caller's table when it has them, else from XState's definition. */
export type GuardNamer = (from: string, event: string, index: number, guard: unknown) => string[] | undefined;

/** XState's `and`, `or` and `not` are functions carrying their operands as `guards`. */
type Combinator = ((...args: never[]) => unknown) & { guards?: unknown[] | undefined };

function guardName(guard: unknown): string {
  if (typeof guard === 'string') return guard;
  if (typeof guard === 'object' && guard !== null && typeof (guard as { type?: unknown }).type === 'string') return (guard as { type: string }).type;
  if (typeof guard !== 'function') return 'guard';
  const operands = (guard as Combinator).guards;
  if (Array.isArray(operands) && guard.name === 'not') return `!${guardName(operands[0])}`;
  if (Array.isArray(operands) && guard.name === 'or') return `(${operands.map(guardName).join(' || ')})`;
  if (Array.isArray(operands) && guard.name === 'and') return operands.map(guardName).join(' && ');
  return guard.name || 'inline guard';
}

function guardNames(guard: unknown): string[] {
  if (guard === undefined || guard === null) return [];
  const operands = (guard as Combinator).guards;
  if (typeof guard === 'function' && guard.name === 'and' && Array.isArray(operands)) return operands.flatMap(guardNames);
  return [guardName(guard)];
}

/**
 * The chart of any XState machine: every state node (nested ones by path) and every
 * transition with its event, target and guard names.
 *
 * @example
 * ```ts
 * import { chartOf } from 'loopchart/viewer';
 * const chart = chartOf(machine);
 * console.log(chart.states.map((s) => s.id), chart.transitions.length);
 * ```
 */
export function chartOf(machine: AnyStateMachine, name?: GuardNamer): ChartModel {
  const states: ChartState[] = [];
  const transitions: ChartTransition[] = [];
  const pathOf = (node: AnyStateNode) => node.path.join('.');
  const visit = (node: AnyStateNode, depth: number) => {
    for (const child of Object.values(node.states) as AnyStateNode[]) {
      const id = pathOf(child);
      states.push({
        id,
        label: child.key,
        depth,
        parent: depth === 0 ? null : pathOf(node),
        initial: node.initial?.target?.some((target: AnyStateNode) => target === child) ?? false,
        final: child.type === 'final',
        parallel: child.type === 'parallel',
      });
      const add = (event: string, list: readonly { target?: readonly AnyStateNode[] | undefined; guard?: unknown }[]) =>
        list.forEach((t, index) => {
          const target = t.target?.[0];
          transitions.push({
            from: id,
            to: target && target !== child ? pathOf(target) : target === child ? id : null,
            event,
            guards: name?.(id, event, index, t.guard) ?? guardNames(t.guard),
          });
        });
      for (const [event, list] of child.transitions) if (!event.startsWith('xstate.')) add(event, list);
      if (child.always) add('always', child.always);
      visit(child, depth + 1);
    }
  };
  visit(machine.root, 0);
  return { id: machine.id, states, transitions };
}

/**
 * The brain's chart. Guard names come from `loopTransitions`, the one table the statechart itself
 * is generated from (XState keeps a compound `and(...)` guard as a function).
 *
 * @example
 * ```ts
 * const chart = brainChart(); // states Start, AwaitingModel, AwaitingTools, AwaitingCompaction, Terminal
 * ```
 */
export function brainChart(): ChartModel {
  return chartOf(loopMachine, (from, event, index) => {
    const list = loopTransitions[from as StateName]?.[event as keyof (typeof loopTransitions)[StateName]];
    return list?.[index] ? [...list[index]!.guards] : undefined;
  });
}
