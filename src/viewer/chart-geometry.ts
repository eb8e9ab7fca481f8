/**
 * A laid-out chart as plain data (what a page embeds and draws), and the text metrics the
 * layout sizes labels by. No layout code here: the page script imports this too.
 */

/** A box in chart coordinates (px). */
export interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}

/** One line of text: where it sits, its size class, and its text. */
export interface TextLine extends Box {
  text: string;
  kind: 'title' | 'internal' | 'edge';
}

export interface LaidOutState extends Box {
  id: string;
  parent: string | null;
  /** Has child states (drawn as a container). */
  compound: boolean;
  /** Its children are regions active at once. */
  parallel: boolean;
  final: boolean;
  /** A compound state drawn folded: how many states it hides (absent when not folded). */
  folded?: number | undefined;
  /** The title, then the transitions that stay in this state. */
  lines: TextLine[];
}

export interface LaidOutEdge {
  from: string;
  to: string;
  /** The state whose box holds the edge (null: the chart itself). */
  container: string | null;
  /** SVG path data, ending at the target's border (or at its jump box when `jump`). */
  path: string;
  /** The edge ends at a jump box standing for its target (a hub), not at the target. */
  jump?: true | undefined;
  /** The label of every transition the edge stands for (the lines show the first few). */
  labels: string[];
  lines: TextLine[];
}

/**
 * Where edges into a hub end instead of at the hub: a state entered from many others (say a
 * `Start` every step returns to) would receive a comb of edges with their labels stacked at one
 * side; each of its sources gets a small box `→ Start` beside it, its edge and label ending there.
 */
export interface LaidOutJump extends Box {
  /** The hub the box stands for. */
  to: string;
  /** The state whose box holds it (its source's parent; null: the chart itself). */
  parent: string | null;
  lines: TextLine[];
}

/** The dot an initial state is entered from, inside its parent's box. */
export interface InitialMarker {
  parent: string | null;
  to: string;
  x: number;
  y: number;
  path: string;
}

export interface ChartLayout {
  /** The compound states this view unfolds (every other one is drawn folded). */
  unfolded: string[];
  width: number;
  height: number;
  states: LaidOutState[];
  edges: LaidOutEdge[];
  jumps: LaidOutJump[];
  initials: InitialMarker[];
}

/** Character advance and line height per text class (monospace, so a width is length × advance). */
export const TEXT_METRICS = {
  title: { size: 12, advance: 7.6, line: 18 },
  // 14: chromium's box of a 10 px DejaVu Sans Mono line is 13.3 px high; at 13 consecutive lines' boxes overlapped.
  internal: { size: 10, advance: 6.2, line: 14 },
  edge: { size: 10.5, advance: 6.6, line: 14 },
} as const;
