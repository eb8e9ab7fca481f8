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
  /** The title, then the transitions that stay in this state. */
  lines: TextLine[];
}

export interface LaidOutEdge {
  from: string;
  to: string;
  /** The state whose box holds the edge (null: the chart itself). */
  container: string | null;
  /** SVG path data, ending at the target's border. */
  path: string;
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
  width: number;
  height: number;
  states: LaidOutState[];
  edges: LaidOutEdge[];
  initials: InitialMarker[];
}

/** Character advance and line height per text class (monospace, so a width is length × advance). */
export const TEXT_METRICS = {
  title: { size: 12, advance: 7.6, line: 18 },
  internal: { size: 10, advance: 6.2, line: 13 },
  edge: { size: 10.5, advance: 6.6, line: 14 },
} as const;
