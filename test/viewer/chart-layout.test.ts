/**
 * The charts' layout in Node (ELK): both charts and any machine come out as compound charts
 * whose boxes nest, every transition has its label line (`event [guard]`), a transition that
 * stays is listed in its state, and XState's `and`/`or`/`not` guards are named by their parts.
 */
import { and, createMachine, not, or } from 'xstate';
import { describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { cachedViews, edgeLabelLines, edgeLines, internalLines, layoutChart, transitionLabel } from '../../src/viewer/chart-layout.js';
import { chartViews, foldChart } from '../../src/viewer/chart-fold.js';
import type { ChartLayout } from '../../src/viewer/chart-geometry.js';
import { brainChart, chartOf, type ChartModel } from '../../src/viewer/chart.js';

const inside = (a: { x: number; y: number; width: number; height: number }, b: typeof a) =>
  a.x >= b.x && a.y >= b.y && a.x + a.width <= b.x + b.width && a.y + a.height <= b.y + b.height;

function checkNesting(layout: ChartLayout) {
  const byId = new Map(layout.states.map((s) => [s.id, s]));
  for (const s of layout.states) {
    if (s.parent) expect(inside(s, byId.get(s.parent)!), `${s.id} inside ${s.parent}`).toBe(true);
    for (const line of s.lines) expect(inside(line, s), `'${line.text}' inside ${s.id}`).toBe(true);
    expect(inside(s, { x: 0, y: 0, width: layout.width, height: layout.height })).toBe(true);
  }
}

/** Every transition with a target has its label among the lines of the edge between its states. */
function checkLabels(chart: ChartModel, layout: ChartLayout) {
  for (const t of chart.transitions) {
    if (t.to === null) continue;
    const edge = layout.edges.find((e) => e.from === t.from && e.to === t.to);
    expect(edge, `${t.from} → ${t.to}`).toBeDefined();
    expect(edge!.path).toMatch(/^M [\d.]+ [\d.]+( L [\d.]+ [\d.]+)+/);
    expect(edge!.labels).toContain(transitionLabel(t));
  }
}

describe('chart layout', () => {
  it('the brain: five states, an edge per pair with a line per transition, stays listed inside the state', async () => {
    const chart = brainChart();
    const layout = await layoutChart(chart);
    checkNesting(layout);
    checkLabels(chart, layout);
    expect(layout.states.map((s) => s.id)).toEqual(['Start', 'AwaitingModel', 'AwaitingTools', 'AwaitingCompaction', 'Terminal']);
    expect(layout.initials.map((i) => i.to)).toEqual(['Start']);
    const start = layout.states.find((s) => s.id === 'Start')!;
    expect(start.lines.map((l) => l.text).join(' ')).toContain('inject, setContextTokens');
  }, 30_000);

  it('the driver: nested states in their parents, an initial dot in each container but a parallel one', async () => {
    const chart = chartOf(createAgentMachine({ model: scriptedModel([{ text: 'x' }]) }));
    const layout = await layoutChart(chart);
    checkNesting(layout);
    checkLabels(chart, layout);
    const working = layout.states.find((s) => s.id === 'Running.AwaitingTools.Working')!;
    expect([working.parallel, working.compound]).toEqual([true, true]);
    const dots = layout.initials.map((i) => i.parent);
    expect(dots).toEqual(expect.arrayContaining([null, 'Running', 'Running.AwaitingTools', 'Running.AwaitingTools.Working.Execution']));
    expect(dots).not.toContain('Running.AwaitingTools.Working');
    // A transition from a parent into its own child is drawn inside the parent.
    expect(layout.edges.find((e) => e.from === 'Running' && e.to === 'Running.Cancelling')?.container).toBe('Running');
  }, 30_000);

  it('guards: and() lists its parts, or() and not() are named by theirs', () => {
    const machine = createMachine(
      { id: 'g', initial: 'a', states: { a: { on: { go: [{ target: 'b', guard: and(['x', not('y')]) }, { target: 'b', guard: or(['x', 'y']) }] } }, b: {} } },
      { guards: { x: () => true, y: () => false } },
    );
    expect(chartOf(machine).transitions.map((t) => t.guards)).toEqual([['x', '!y'], ['(x || y)']]);
  });

  it('label text: long labels wrap, stays group by guard', () => {
    expect(edgeLines('compactionResult [feedIsValid && compactionMadeNoProgress]')).toEqual(['compactionResult [feedIsValid', '  && compactionMadeNoProgress]']);
    expect(internalLines([
      { from: 's', to: null, event: 'inject', guards: ['ok'] },
      { from: 's', to: null, event: 'steer', guards: ['ok'] },
      { from: 's', to: null, event: 'cancel', guards: [] },
    ])).toEqual(['inject, steer [ok]', 'cancel']);
  });

  it('edge labels: at most three transitions listed, then how many more (all of them kept for the tooltip)', () => {
    expect(edgeLabelLines(['a', 'b', 'c'])).toEqual(['a', 'b', 'c']);
    expect(edgeLabelLines(['a', 'b', 'c', 'd', 'e'])).toEqual(['a', 'b', '+3 more']);
  });
});

/** A machine no viewer test was written for: a hub entered from seven states, compound states two deep. */
const hubMachine = () =>
  createMachine({
    id: 'hub',
    initial: 'home',
    states: {
      home: { on: { a: 'one', b: 'two', c: 'three', d: 'four', e: 'five', f: 'six', g: 'nest' } },
      one: { on: { back: 'home' } },
      two: { on: { back: 'home' } },
      three: { on: { back: 'home' } },
      four: { on: { back: 'home' } },
      five: { on: { back: 'home' } },
      six: { on: { back: 'home', next: 'one' } },
      nest: {
        initial: 'x',
        on: { back: 'home' },
        states: { x: { on: { go: 'y' } }, y: { initial: 'p', states: { p: { on: { q: 'q' } }, q: { on: { out: '#hub.home' } } } } },
      },
    },
  });

describe('folding and hubs, for any chart', () => {
  it('folding hides a compound state\'s insides and draws their transitions from and to its box', () => {
    const chart = chartOf(hubMachine());
    expect(chartViews(chart)).toEqual([[], ['nest'], ['nest', 'nest.y']]);
    const folded = foldChart(chart, []);
    expect(folded.states.map((s) => s.id)).toEqual(['home', 'one', 'two', 'three', 'four', 'five', 'six', 'nest']);
    expect(folded.folded).toEqual(new Map([['nest', 4]]));
    // nest.y.q → home is drawn from nest; nest.x → nest.y happens inside: not drawn.
    expect(folded.transitions.filter((t) => t.from === 'nest').map((t) => `${t.event}→${t.to}`)).toEqual(['back→home', 'out→home']);
    const half = foldChart(chart, ['nest']);
    expect(half.states.map((s) => s.id)).toContain('nest.y');
    expect(half.folded).toEqual(new Map([['nest.y', 2]]));
    expect(half.transitions.find((t) => t.event === 'out')).toMatchObject({ from: 'nest.y', to: 'home' });
  });

  it('a state entered from more than five states gets no comb: each source\'s edge ends at a jump box beside it', async () => {
    const chart = chartOf(hubMachine());
    const views = (await cachedViews(chart))!;
    expect(views.map((v) => v.unfolded)).toEqual([[], ['nest'], ['nest', 'nest.y']]);
    for (const layout of views) {
      checkNesting(layout);
      const into = layout.edges.filter((e) => e.to === 'home');
      expect(into.length).toBeGreaterThan(5);
      expect(into.every((e) => e.jump)).toBe(true);
      expect(layout.jumps.filter((j) => j.to === 'home')).toHaveLength(into.length);
      // One is not a hub: its edges end at it.
      expect(layout.edges.filter((e) => e.to === 'one').every((e) => !e.jump)).toBe(true);
      for (const jump of layout.jumps) expect(jump.lines.map((l) => l.text)).toEqual(['→ home']);
    }
    const folded = views[0]!.states.find((s) => s.id === 'nest')!;
    expect([folded.folded, folded.lines[1]!.text]).toEqual([4, '▸ 4 states inside']);
  }, 60_000);
});
