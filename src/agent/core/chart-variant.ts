/**
 * The chart one agent runs: the shared chart without what cannot happen to that agent. A feature
 * that is not configured has guards that cannot hold (see `configured` in bind.ts); their
 * branches are taken out, as are its actions that do nothing for it (`configuredAction`). A state
 * left with nothing to decide (one unguarded eventless branch and nothing else: `Start` for an
 * agent with no budget, guardrails, operations or output schema) is passed through, not stopped
 * at: a transition into it goes where its branch goes, with its actions. A branch that does
 * nothing but move to a sibling that only decides (`CallTools` for an agent with nothing before
 * its batches) takes that sibling's branches itself. Every state stays, so a snapshot of one
 * variant runs in another, and a run takes the same transitions with the same actions, in fewer
 * XState microsteps (each one clones the snapshot and evaluates every eventless list again).
 */
import { and, or } from 'xstate';

/** A state's config as the chart writes it (a plain object; see `machines/agent.machine.ts`). */
type StateConfig = { readonly [key: string]: unknown; readonly states?: Readonly<Record<string, StateConfig>> | undefined };
/** One transition as the chart writes it. */
type Transition = { readonly guard?: unknown; readonly target?: string | undefined; readonly actions?: unknown; readonly reenter?: boolean | undefined };

/** XState's combined guards, told apart by their check function (names do not survive a minifier). */
const andCheck = (and([]) as unknown as { check: unknown }).check;
const orCheck = (or([]) as unknown as { check: unknown }).check;

/**
 * Whether `guard` can hold, given what `holds` says of a named guard: `and` needs every part, `or`
 * one; anything else (`not`, a guard with params read by name) is asked by its name.
 */
function mayHold(guard: unknown, holds: (name: string) => boolean): boolean {
  if (guard === undefined) return true;
  if (typeof guard === 'string') return holds(guard);
  const combined = guard as { check?: unknown; guards?: readonly unknown[] | undefined; type?: unknown };
  if (combined.check === andCheck) return combined.guards!.every((part) => mayHold(part, holds));
  if (combined.check === orCheck) return combined.guards!.some((part) => mayHold(part, holds));
  return typeof combined.type === 'string' ? holds(combined.type) : true;
}

/** A transition entry as a list of branches (a lone target string is a branch with that target). */
const listOf = (value: unknown): Transition[] =>
  (Array.isArray(value) ? value : [value]).map((branch) => (typeof branch === 'string' ? { target: branch } : branch)) as Transition[];
const actionsOf = (value: unknown): unknown[] => (value === undefined ? [] : Array.isArray(value) ? value : [value]);

/** The keys a state passed through may have: anything else (entry, exit, on, after, invoke, states) is work done there. */
const INERT_KEYS = new Set(['always', 'description', 'meta']);

/** Where a pass-through state sends a transition into it: its branch's target (absolute path), actions, reenter. */
type Through = { readonly path: readonly string[]; readonly actions: readonly unknown[]; readonly reenter: boolean };

/** An action as the chart names it: a name, or `{ type, params }`; undefined for an inline function. */
const actionName = (action: unknown): string | undefined =>
  typeof action === 'string' ? action : typeof (action as { type?: unknown }).type === 'string' ? (action as { type: string }).type : undefined;

/**
 * `config` (the root of a chart whose id is `rootId`) for an agent whose named guards hold as
 * `holds` says and whose named actions do something as `acts` says: branches that cannot hold and
 * actions that do nothing taken out, a list left empty taken out with them (an event no branch
 * takes goes to the parent, as before; a timer no branch takes is not armed), and transitions
 * into a state with nothing left to decide sent where it sends them.
 *
 * @example
 * ```ts
 * const chart = { initial: 'A', states: { A: { always: [{ guard: 'paused', target: 'C' }, { target: 'B' }] }, B: {}, C: {} } };
 * const variant = chartVariant(chart, 'demo', (guard) => guard !== 'paused');
 * console.log(variant.initial); // 'B': A has nothing left to decide
 * ```
 */
export function chartVariant<C extends object>(config: C, rootId: string, holds: (name: string) => boolean, acts: (name: string) => boolean = () => true): C {
  const pruned = prune(config as StateConfig, holds, acts);
  const through = passThroughs(pruned, rootId);
  const direct = through.size === 0 ? pruned : retarget(pruned, [], rootId, through);
  const decisions = decisionStates(direct, rootId);
  return (decisions.size === 0 ? direct : fold(direct, [], rootId, decisions)) as C;
}

/**
 * Whether a transition from `source` that went by a sibling (and so left its source) comes back
 * into it: its target (paths from the root) is the source or inside it. Taken directly, such a
 * transition must say `reenter`, or XState would neither exit nor enter the source again.
 */
const backIntoSource = (source: readonly string[], target: readonly string[]) =>
  target.length >= source.length && source.every((name, i) => target[i] === name);

/** The config with the branches that cannot hold and the actions that do nothing taken out, in every state. */
function prune(state: StateConfig, holds: (name: string) => boolean, acts: (name: string) => boolean): StateConfig {
  const out: Record<string, unknown> = { ...state };
  const live = (actions: unknown) => actionsOf(actions).filter((action) => {
    const name = actionName(action);
    return name === undefined || acts(name);
  });
  // A list with nothing taken out is left as written.
  const withLiveActions = (branch: Transition): Transition => {
    if (branch.actions === undefined) return branch;
    const { actions, ...rest } = branch;
    const kept = live(actions);
    return kept.length === actionsOf(actions).length ? branch : kept.length > 0 ? { ...rest, actions: kept } : rest;
  };
  const kept = (value: unknown) => listOf(value).filter((branch) => mayHold(branch.guard, holds)).map(withLiveActions);
  if (state.always !== undefined) {
    const always = kept(state.always);
    if (always.length > 0) out.always = always;
    else delete out.always;
  }
  for (const key of ['on', 'after'] as const) {
    const table = state[key] as Record<string, unknown> | undefined;
    if (!table) continue;
    const entries = Object.entries(table).flatMap(([name, value]) => {
      const branches = kept(value);
      return branches.length > 0 ? [[name, branches] as const] : [];
    });
    if (entries.length > 0) out[key] = Object.fromEntries(entries);
    else delete out[key];
  }
  for (const key of ['entry', 'exit'] as const) {
    if (state[key] === undefined) continue;
    const actions = live(state[key]);
    if (actions.length === 0) delete out[key];
    else if (actions.length < actionsOf(state[key]).length) out[key] = actions;
  }
  if (state.states) out.states = Object.fromEntries(Object.entries(state.states).map(([name, child]) => [name, prune(child, holds, acts)]));
  return out;
}

/** `target` written in the state at `source` (a path from the root), as a path from the root; null for an id other than the root's. */
function resolve(source: readonly string[], target: string, rootId: string): string[] | null {
  if (target.startsWith('#')) {
    const [id, ...path] = target.slice(1).split('.');
    return id === rootId ? path : null;
  }
  // XState reads a target from the source's parent; a leading dot names the source's own child.
  const base = target.startsWith('.') ? [...source] : source.slice(0, -1);
  return [...base, ...target.replace(/^\./, '').split('.')];
}

/**
 * The states that do nothing but decide, each with its path and eventless branches: no entry,
 * exit, events, timers or children, not the root, and not a region of a parallel state (its
 * siblings run beside it, not after it). A pass-through and a decision state are such states.
 */
function decidingOnly(root: StateConfig): { path: string[]; always: Transition[] }[] {
  const found: { path: string[]; always: Transition[] }[] = [];
  const visit = (state: StateConfig, path: string[], inParallel: boolean) => {
    const inert = Object.keys(state).every((key) => INERT_KEYS.has(key));
    if (path.length > 0 && !inParallel && inert && state.always !== undefined) found.push({ path, always: listOf(state.always) });
    for (const [name, child] of Object.entries(state.states ?? {})) visit(child, [...path, name], state.type === 'parallel');
  };
  visit(root, [], false);
  return found;
}

/** The states with nothing left to decide, by path ('Running.Start'), each with where it finally sends a transition. */
function passThroughs(root: StateConfig, rootId: string): Map<string, Through> {
  const own = new Map<string, { path: string[]; branch: Transition }>();
  for (const { path, always } of decidingOnly(root)) {
    const [branch] = always;
    if (always.length !== 1 || branch!.guard !== undefined || typeof branch!.target !== 'string') continue;
    const target = resolve(path, branch!.target, rootId);
    if (target) own.set(path.join('.'), { path: target, branch: branch! });
  }
  // A chain (one pass-through into another) is followed to its end; a cycle is left as it is.
  const through = new Map<string, Through>();
  for (const start of own.keys()) {
    let path = start;
    const actions: unknown[] = [];
    let reenter = false;
    const seen = new Set<string>();
    while (own.has(path) && !seen.has(path)) {
      seen.add(path);
      const { path: next, branch } = own.get(path)!;
      actions.push(...actionsOf(branch.actions));
      reenter ||= branch.reenter === true;
      path = next.join('.');
    }
    if (!own.has(path)) through.set(start, { path: path.split('.'), actions, reenter });
  }
  return through;
}

/** The config with every transition into a pass-through state sent where that state sends it. */
function retarget(state: StateConfig, path: string[], rootId: string, through: Map<string, Through>): StateConfig {
  const out: Record<string, unknown> = { ...state };
  const send = (branch: Transition): Transition => {
    if (typeof branch.target !== 'string') return branch;
    const target = resolve(path, branch.target, rootId);
    const hop = target && through.get(target.join('.'));
    if (!hop) return branch;
    const actions = [...actionsOf(branch.actions), ...hop.actions];
    return {
      ...branch,
      target: `#${rootId}.${hop.path.join('.')}`,
      ...(actions.length > 0 && { actions }),
      ...((branch.reenter || hop.reenter) && { reenter: true }),
    };
  };
  if (state.always !== undefined) out.always = listOf(state.always).map(send);
  for (const key of ['on', 'after'] as const) {
    const table = state[key] as Record<string, unknown> | undefined;
    if (table) out[key] = Object.fromEntries(Object.entries(table).map(([name, value]) => [name, listOf(value).map(send)]));
  }
  // A compound state starting in a pass-through child starts where that child sends it, when that is another child and nothing is done on the way.
  const initial = typeof state.initial === 'string' ? through.get([...path, state.initial].join('.')) : undefined;
  if (initial && initial.actions.length === 0 && initial.path.length === path.length + 1 && initial.path.slice(0, -1).join('.') === path.join('.')) {
    out.initial = initial.path.at(-1);
  }
  if (state.states) out.states = Object.fromEntries(Object.entries(state.states).map(([name, child]) => [name, retarget(child, [...path, name], rootId, through)]));
  return out;
}

/**
 * The states that only decide (see `decidingOnly`) and whose last branch is unguarded, so entering
 * one always leaves it at once: by path, each with its branches, targets written from the root.
 */
function decisionStates(root: StateConfig, rootId: string): Map<string, Transition[]> {
  const found = new Map<string, Transition[]>();
  for (const { path, always } of decidingOnly(root)) {
    const targets = always.map((branch) => (typeof branch.target === 'string' ? resolve(path, branch.target, rootId) : null));
    if (always.length === 0 || always.at(-1)!.guard !== undefined || targets.some((target) => target === null)) continue;
    found.set(path.join('.'), always.map((branch, i) => ({ ...branch, target: `#${rootId}.${targets[i]!.join('.')}` })));
  }
  return found;
}

/** The longest list of branches the chart writes (issue 39: no eventless list longer than 8). */
const LONGEST_LIST = 8;

/** Both guards (either may be absent). */
const both = (first: unknown, second: unknown) => (first === undefined ? second : second === undefined ? first : and([first as never, second as never]));

/**
 * The config with each branch that only moves to a sibling that only makes a decision (see
 * `decisionStates`; `CallTools` for an agent whose batch has nothing before it) replaced by that
 * sibling's branches, each guarded by the branch's own guard as well: one microstep instead of
 * two. Exact when the branch does nothing itself, so the sibling's guards read the same context,
 * and the sibling always takes one of its branches, as a decision state does.
 */
function fold(state: StateConfig, path: string[], rootId: string, decisions: Map<string, Transition[]>): StateConfig {
  const out: Record<string, unknown> = { ...state };
  const expand = (branch: Transition): Transition[] => {
    if (typeof branch.target !== 'string' || actionsOf(branch.actions).length > 0) return [branch];
    const target = resolve(path, branch.target, rootId);
    const sibling = target !== null && target.length === path.length && target.join('.') !== path.join('.') && target.slice(0, -1).join('.') === path.slice(0, -1).join('.');
    const decided = sibling ? decisions.get(target.join('.')) : undefined;
    if (!decided) return [branch];
    return decided.map(({ guard, reenter, ...rest }) => {
      const into = resolve([], rest.target!, rootId)!;
      const combined = both(branch.guard, guard);
      return { ...rest, ...(combined !== undefined && { guard: combined }), ...((reenter || backIntoSource(path, into)) && { reenter: true }) };
    });
  };
  // A list the fold would make longer than the chart's own longest is left as it was: it still reads as a short list.
  const folded = (value: unknown) => {
    const list = listOf(value);
    const expanded = list.flatMap(expand);
    return expanded.length <= LONGEST_LIST ? expanded : list;
  };
  if (state.always !== undefined) out.always = folded(state.always);
  for (const key of ['on', 'after'] as const) {
    const table = state[key] as Record<string, unknown> | undefined;
    if (table) out[key] = Object.fromEntries(Object.entries(table).map(([name, value]) => [name, folded(value)]));
  }
  if (state.states) out.states = Object.fromEntries(Object.entries(state.states).map(([name, child]) => [name, fold(child, [...path, name], rootId, decisions)]));
  return out;
}
