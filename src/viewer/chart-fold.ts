import type { ChartModel, ChartState, ChartTransition } from './chart.js';

/**
 * Folding a chart: a folded compound state is drawn as one box, its descendants left out, and
 * every transition from or to a descendant drawn from or to the box (one edge per pair of boxes,
 * as everywhere). Transitions inside a folded state are not drawn; unfolding it shows them. The
 * page offers the views below, each laid out once in Node: any chart, whatever its states' names.
 */

/** A chart as drawn with some compound states folded. */
export interface FoldedChart extends ChartModel {
  /** The folded compound states (drawn as boxes) with how many states each hides. */
  folded: Map<string, number>;
}

/** The compound states of a chart (those with children), outermost first. */
export function compoundsOf(chart: ChartModel): string[] {
  const parents = new Set(chart.states.map((s) => s.parent).filter((p): p is string => p !== null));
  return chart.states.filter((s) => parents.has(s.id)).map((s) => s.id);
}

/** The compound states holding `id` (outermost first) and `id` itself when it is one. */
function chainOf(chart: ChartModel, id: string): string[] {
  const byId = new Map(chart.states.map((s) => [s.id, s]));
  const chain: string[] = [];
  for (let at = byId.get(id); at; at = at.parent === null ? undefined : byId.get(at.parent)) chain.unshift(at.id);
  const compounds = new Set(compoundsOf(chart));
  return chain.filter((s) => compounds.has(s));
}

/** Compound states nested deeper than this get no view of their own: unfolding one shows the whole chart. */
const VIEW_DEPTH = 1;

/**
 * The views a page can show, by the compound states they unfold: every state folded, each
 * compound state of the first levels unfolded with the states that hold it (its siblings' insides
 * folded), and everything unfolded. Each view is an ELK layout made when the viewer starts (a
 * second or so each on a busy machine), so deeper states share the last view. A reader
 * unfolding a state moves to the smallest view that unfolds it; folding it, to its parent's.
 */
export function chartViews(chart: ChartModel): string[][] {
  const compounds = compoundsOf(chart);
  const depth = new Map(chart.states.map((s) => [s.id, s.depth]));
  const views = [[], ...compounds.filter((id) => depth.get(id)! <= VIEW_DEPTH).map((id) => chainOf(chart, id)), compounds];
  const seen = new Set<string>();
  return views.filter((view) => {
    const key = view.join('\n');
    return seen.has(key) ? false : (seen.add(key), true);
  });
}

/** The chart with every compound state not in `unfolded` folded (a state inside a folded one is folded with it). */
export function foldChart(chart: ChartModel, unfolded: readonly string[]): FoldedChart {
  const open = new Set(unfolded);
  const compounds = new Set(compoundsOf(chart));
  /** The box a state is drawn in: itself, or its outermost folded ancestor. */
  const shownAs = new Map<string, string>();
  const folded = new Map<string, number>();
  const states: ChartState[] = [];
  for (const state of chart.states) {
    const holder = state.parent === null ? undefined : shownAs.get(state.parent);
    // Inside a folded state: its parent is folded, or drawn inside a folded one itself.
    if (holder !== undefined && (holder !== state.parent || folded.has(holder))) {
      shownAs.set(state.id, holder);
      folded.set(holder, (folded.get(holder) ?? 0) + 1);
      continue;
    }
    shownAs.set(state.id, state.id);
    states.push(state);
    if (compounds.has(state.id) && !open.has(state.id)) folded.set(state.id, 0);
  }
  const transitions: ChartTransition[] = [];
  for (const t of chart.transitions) {
    const from = shownAs.get(t.from) ?? t.from;
    const to = t.to === null ? null : (shownAs.get(t.to) ?? t.to);
    // A transition inside a folded state (or one that stays in a state inside it) is not drawn.
    if ((from !== t.from && (to === from || t.to === null)) || (to !== t.to && to === from)) continue;
    transitions.push({ ...t, from, to });
  }
  return { id: chart.id, states, transitions, folded };
}
