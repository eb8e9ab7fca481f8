/// <reference lib="dom" />
/**
 * A chart in a box the page's width: fitted to the box, zoomed (buttons, Ctrl/⌘ + wheel, `+`
 * `-` `0` keys) and panned (drag, arrow keys) by moving the SVG's viewBox, never by growing the
 * page. Compound states fold and unfold from their titles, between the views laid out in Node
 * (../chart-fold.ts). The first view unfolds the states holding the current state and centres it.
 */
import type { ChartLayout } from '../chart-geometry.js';
import { drawChart } from './chart-view.js';

/** Below this scale labels are too small to read: a first view that cannot fit zooms no further out, it centres the current state. */
const READABLE = 0.6;
const MIN_SCALE = 0.1;
const MAX_SCALE = 3;
const STEP = 1.25;

interface Camera {
  /** The chart point at the frame's centre, and px of screen per chart unit. */
  cx: number;
  cy: number;
  scale: number;
}

export interface ChartFrame {
  element: HTMLElement;
  /** Each drawn state's group by its id (for highlighting); changes when the view changes. */
  nodes(): ReadonlyMap<string, SVGElement>;
  /** Shows the states of `paths` (`a.b | c.d`): unfolds what holds them, or pans them into the box. */
  reveal(paths: string): void;
}

/** The compound states among a state path's ancestors (`a.b.c` → `a`, `a.b`, where drawn as compound in the fullest view). */
function holdersOf(path: string, compounds: ReadonlySet<string>): string[] {
  const parts = path.split('.');
  return parts.slice(1).map((_, i) => parts.slice(0, i + 1).join('.')).filter((id) => compounds.has(id));
}

/** The view with the fewest unfolded states that unfolds every state of `required` and not `without`. */
function pickView(views: readonly ChartLayout[], required: readonly string[], without?: string): ChartLayout {
  const fits = views.filter((view) => required.every((id) => view.unfolded.includes(id)) && (without === undefined || !view.unfolded.includes(without)));
  return fits.sort((a, b) => a.unfolded.length - b.unfolded.length)[0] ?? views[0]!;
}

const el = (tag: string, attrs: Record<string, string>, text?: string) => {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
};

/** The box around the states of `paths` (`a.b | c.d`: parallel regions) in `view`, each drawn itself or as its folded holder. */
function boxAround(view: ChartLayout, compounds: ReadonlySet<string>, paths: string): { x: number; y: number; width: number; height: number } {
  const boxes = paths.split(' | ').flatMap((path) => {
    const ids = [path, ...holdersOf(path, compounds).reverse()];
    const state = ids.map((id) => view.states.find((s) => s.id === id)).find((s) => s !== undefined);
    return state ? [state] : [];
  });
  if (boxes.length === 0) return { x: 0, y: 0, width: view.width, height: view.height };
  const x = Math.min(...boxes.map((b) => b.x));
  const y = Math.min(...boxes.map((b) => b.y));
  return { x, y, width: Math.max(...boxes.map((b) => b.x + b.width)) - x, height: Math.max(...boxes.map((b) => b.y + b.height)) - y };
}

/** What the frame's input moves. */
interface Controls {
  camera(): Camera;
  apply(camera: Camera): void;
  zoom(factor: number, at?: { x: number; y: number }): void;
  fit(): void;
  /** Unfolds a folded compound state, folds an unfolded one. */
  toggle(id: string, folded: boolean): void;
}

/** The frame's input: a click on a compound state's title folds or unfolds it; Ctrl/⌘ + wheel zooms; a drag pans; keys zoom and pan. */
function listen(box: HTMLElement, controls: Controls): void {
  let drag: { x: number; y: number; camera: Camera } | null = null;
  let moved = false;
  box.addEventListener('click', (event) => {
    if (moved) return;
    const node = (event.target as Element).closest<SVGGElement>('g[data-fold]');
    const id = node?.dataset.state;
    if (node && id) controls.toggle(id, node.dataset.fold === 'folded');
  });
  box.addEventListener(
    'wheel',
    (event) => {
      if (!event.ctrlKey && !event.metaKey) return;
      event.preventDefault();
      const rect = box.getBoundingClientRect();
      controls.zoom(event.deltaY < 0 ? STEP : 1 / STEP, { x: event.clientX - rect.left, y: event.clientY - rect.top });
    },
    { passive: false },
  );
  box.addEventListener('pointerdown', (event) => {
    drag = { x: event.clientX, y: event.clientY, camera: controls.camera() };
    moved = false;
  });
  box.addEventListener('pointermove', (event) => {
    if (!drag) return;
    const dx = event.clientX - drag.x;
    const dy = event.clientY - drag.y;
    // A click that wobbles a few pixels is still a click (it folds), not a pan.
    if (!moved && Math.hypot(dx, dy) < 4) return;
    if (!moved) box.setPointerCapture(event.pointerId);
    moved = true;
    controls.apply({ ...drag.camera, cx: drag.camera.cx - dx / drag.camera.scale, cy: drag.camera.cy - dy / drag.camera.scale });
  });
  const endDrag = () => {
    drag = null;
  };
  box.addEventListener('pointerup', endDrag);
  box.addEventListener('pointercancel', endDrag);
  box.addEventListener('keydown', (event) => {
    const camera = controls.camera();
    const pan = 60 / camera.scale;
    const keys = new Map<string, () => void>([
      ['+', () => controls.zoom(STEP)],
      ['=', () => controls.zoom(STEP)],
      ['-', () => controls.zoom(1 / STEP)],
      ['0', () => controls.fit()],
      ['ArrowLeft', () => controls.apply({ ...camera, cx: camera.cx - pan })],
      ['ArrowRight', () => controls.apply({ ...camera, cx: camera.cx + pan })],
      ['ArrowUp', () => controls.apply({ ...camera, cy: camera.cy - pan })],
      ['ArrowDown', () => controls.apply({ ...camera, cy: camera.cy + pan })],
    ]);
    const act = keys.get(event.key);
    if (!act) return;
    event.preventDefault();
    act();
  });
}

/**
 * The frame of one chart. `current` is the current state path (`a.b | c.d` for parallel
 * states); `onDraw` runs after each (re)draw, so the page marks states again.
 */
export function chartFrame(views: readonly ChartLayout[], name: string, label: string, current: string, onDraw: () => void): ChartFrame {
  const compounds = new Set(views.at(-1)!.unfolded);
  const box = el('div', { class: 'chart-frame', tabindex: '0', 'data-frame': name, 'aria-label': `${label}: drag to pan, Ctrl + wheel or + and - to zoom, 0 to fit` });
  const tools = el('div', { class: 'chart-tools', role: 'toolbar', 'aria-label': `${label} view` });
  const element = el('div', { class: 'chart-view' });
  element.append(tools, box);
  let view = pickView(views, current.split(' | ').flatMap((path) => holdersOf(path, compounds)));
  let drawn = drawChart(view, name, label);
  let camera: Camera = { cx: view.width / 2, cy: view.height / 2, scale: 1 };

  const size = () => ({ w: box.clientWidth || 800, h: box.clientHeight || 400 });
  const fitScale = () => {
    const { w, h } = size();
    return Math.min(w / view.width, h / view.height, 1);
  };
  /** Keeps the chart in sight: along an axis where it is smaller than the frame it is centred, else the frame stays within it. */
  const clamp = (c: Camera): Camera => {
    const { w, h } = size();
    const axis = (centre: number, length: number, span: number) => (span >= length ? length / 2 : Math.min(Math.max(centre, span / 2), length - span / 2));
    const scale = Math.min(Math.max(c.scale, Math.min(MIN_SCALE, fitScale())), MAX_SCALE);
    return { scale, cx: axis(c.cx, view.width, w / scale), cy: axis(c.cy, view.height, h / scale) };
  };
  const apply = (next: Camera) => {
    camera = clamp(next);
    const { w, h } = size();
    const vw = w / camera.scale;
    const vh = h / camera.scale;
    drawn.svg.setAttribute('viewBox', `${camera.cx - vw / 2} ${camera.cy - vh / 2} ${vw} ${vh}`);
    box.dataset.scale = camera.scale.toFixed(3);
  };
  const boxOf = (paths: string) => boxAround(view, compounds, paths);
  /**
   * Centres `paths`: at scale 1 when the whole chart fits, else at a readable scale, smaller
   * still (down to the whole chart) when the states do not fit at it.
   */
  const focus = (paths: string) => {
    const { w, h } = size();
    const target = boxOf(paths);
    const margin = 24;
    const around = Math.min((w - margin) / target.width, (h - margin) / target.height);
    const scale = Math.max(fitScale(), Math.min(READABLE, around, 1));
    apply({ cx: target.x + target.width / 2, cy: target.y + target.height / 2, scale: Math.min(Math.max(scale, fitScale()), 1) });
  };
  /** The box fits the chart's height up to 70% of the window, so a small chart leaves no empty band. */
  const frameHeight = () => {
    box.style.height = `${Math.round(Math.min(window.innerHeight * 0.7, Math.max(220, view.height + 16)))}px`;
  };
  const show = (next: ChartLayout, around: string) => {
    view = next;
    drawn = drawChart(view, name, label);
    box.replaceChildren(drawn.svg);
    frameHeight();
    onDraw();
    focus(around);
  };

  const button = (text: string, title: string, act: () => void) => {
    const b = el('button', { type: 'button', class: 'chart-tool', title, 'aria-label': title }, text);
    b.addEventListener('click', act);
    tools.append(b);
  };
  const zoom = (factor: number, at?: { x: number; y: number }) => {
    const { w, h } = size();
    const scale = camera.scale * factor;
    // Zooming around a point keeps that point under the pointer.
    const px = at ? at.x - w / 2 : 0;
    const py = at ? at.y - h / 2 : 0;
    apply({ scale, cx: camera.cx + px / camera.scale - px / scale, cy: camera.cy + py / camera.scale - py / scale });
  };
  const fit = () => apply({ cx: view.width / 2, cy: view.height / 2, scale: fitScale() });
  button('−', 'zoom out', () => zoom(1 / STEP));
  button('+', 'zoom in', () => zoom(STEP));
  button('fit', 'fit the whole chart in the box', fit);
  if (compounds.size > 0) {
    button('fold all', 'fold every compound state', () => show(views[0]!, current));
    button('unfold all', 'unfold every compound state', () => show(views.at(-1)!, current));
  }

  listen(box, {
    camera: () => camera,
    apply,
    zoom,
    fit,
    toggle: (id, folded) => (folded ? show(pickView(views, [...holdersOf(id, compounds), id]), id) : show(pickView(views, holdersOf(id, compounds), id), id)),
  });
  // The frame's width follows the window: keep the same point in the centre.
  new ResizeObserver(() => apply(camera)).observe(box);

  box.append(drawn.svg);
  frameHeight();
  // Placed once the frame is in the page and has a size (the caller appends it, then the next frame runs).
  requestAnimationFrame(() => {
    // A chart small enough to read whole in its box opens with every state unfolded.
    const all = views.at(-1)!;
    const { w, h } = size();
    if (view !== all && Math.min(w / all.width, h / all.height) >= READABLE) show(all, current);
    else focus(current);
    box.dataset.placed = 'true';
  });
  const reveal = (paths: string) => {
    const list = paths ? paths.split(' | ') : [];
    if (list.length === 0) return;
    if (list.some((path) => !view.states.some((s) => s.id === path))) {
      const next = pickView(views, [...view.unfolded, ...list.flatMap((path) => holdersOf(path, compounds))]);
      if (next !== view) return show(next, paths);
    }
    const { w, h } = size();
    const target = boxOf(paths);
    const seen = { x: camera.cx - w / camera.scale / 2, y: camera.cy - h / camera.scale / 2, width: w / camera.scale, height: h / camera.scale };
    const within = target.x >= seen.x && target.y >= seen.y && target.x + target.width <= seen.x + seen.width && target.y + target.height <= seen.y + seen.height;
    if (!within) apply({ ...camera, cx: target.x + target.width / 2, cy: target.y + target.height / 2 });
  };
  return { element, nodes: () => drawn.nodes, reveal };
}
