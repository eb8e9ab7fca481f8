/**
 * The statecharts as chromium draws them (issue 24 item 4): the brain and the driver laid out
 * by ELK as compound charts, guards on the edges. Geometry read from the rendered SVG: no two
 * labels' boxes overlap, no label overlaps a state box it does not belong to, nothing is
 * outside the SVG's viewport; the current and selected states are highlighted. Screenshots of
 * both charts are written to test/browser/artifacts/.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BrowserContext, type Page } from 'playwright-core';
import { hasChromium, launchChromium } from './support/chromium.js';
import { createActor, createMachine } from 'xstate';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { startViewer, viewerInspector, type RunningViewer } from '../../src/viewer.js';
import { liveAgent } from './fixtures/live-agent.js';

const ARTIFACTS = fileURLToPath(new URL('./artifacts/', import.meta.url));

const root = mkdtempSync(join(tmpdir(), 'loopchart-chart-'));
let context: BrowserContext;
let page: Page;
let viewer: RunningViewer;
let store: SqliteSessionStore;

interface Rect {
  x: number;
  y: number;
  width: number;
  height: number;
}
interface Geometry {
  viewport: Rect;
  states: { id: string; box: Rect }[];
  labels: { text: string; kind: string; owner: string; box: Rect }[];
  edges: Rect[];
}

/** Every box in the chart's own coordinates (getBBox), with each label's owner. */
const geometryOf = (p: Page, chart: string): Promise<Geometry> =>
  p.evaluate((name) => {
    const svg = document.querySelector<SVGSVGElement>(`svg[data-chart="${name}"]`)!;
    const box = (e: SVGGraphicsElement) => {
      const b = e.getBBox();
      return { x: b.x, y: b.y, width: b.width, height: b.height };
    };
    // The whole drawing (the viewBox is the frame's camera: zoomed and panned).
    return {
      viewport: { x: 0, y: 0, width: Number(svg.dataset.width), height: Number(svg.dataset.height) },
      states: [...svg.querySelectorAll<SVGGElement>('.node')].map((g) => ({ id: g.dataset.state!, box: box(g.querySelector<SVGRectElement>('rect.box')!) })),
      labels: [...svg.querySelectorAll<SVGTextElement>('text.label')].map((t) => ({ text: t.textContent!, kind: t.classList[1]!, owner: t.dataset.owner!, box: box(t) })),
      edges: [...svg.querySelectorAll<SVGGElement>('.edge path, .initial path')].map((path) => box(path as SVGGraphicsElement)),
    };
  }, chart);

const intersects = (a: Rect, b: Rect) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
const inside = (a: Rect, b: Rect, slack = 0.5) => a.x >= b.x - slack && a.y >= b.y - slack && a.x + a.width <= b.x + b.width + slack && a.y + a.height <= b.y + b.height + slack;
const owns = (state: string, owner: string) => owner === state || owner.startsWith(`${state}.`);

/** What is wrong with a chart's geometry, as readable lines (empty: nothing). */
function problems(g: Geometry): string[] {
  const found: string[] = [];
  for (const [i, a] of g.labels.entries()) {
    for (const b of g.labels.slice(i + 1)) if (intersects(a.box, b.box)) found.push(`labels overlap: '${a.text}' and '${b.text}'`);
    for (const s of g.states) {
      // A label belongs to its owner and that owner's ancestors: inside those, clear of every other box.
      if (owns(s.id, a.owner)) {
        if (!inside(a.box, s.box)) found.push(`label '${a.text}' sticks out of ${s.id}`);
      } else if (intersects(a.box, s.box)) found.push(`label '${a.text}' (of ${a.owner || 'the chart'}) overlaps state ${s.id}`);
    }
  }
  for (const item of [...g.states.map((s) => s.box), ...g.labels.map((l) => l.box), ...g.edges]) {
    if (!inside(item, g.viewport)) found.push(`clipped: ${JSON.stringify(item)} outside the viewport ${JSON.stringify(g.viewport)}`);
  }
  return found;
}

/** Each edge's transitions, from its tooltip (the drawn lines list the first few). */
const edgeTexts = (p: Page, chart: string) =>
  p.locator(`svg[data-chart="${chart}"] g.edge`).evaluateAll((edges) => edges.flatMap((e) => e.querySelector('title')!.textContent!.split('\n').slice(1)));
/** Opens a session page with every compound state of the driver unfolded. */
async function unfolded(p: Page, url: string) {
  await p.goto(url);
  await p.waitForSelector('[data-frame="driver"][data-placed="true"]');
  await p.locator('#chart-driver .chart-tool', { hasText: /^unfold all$/ }).click();
}
const containing = (texts: string[], label: string) => texts.some((t) => t.includes(label));

const marked = (p: Page, chart: string, cls: string) =>
  p.locator(`svg[data-chart="${chart}"] .node.${cls}`).evaluateAll((nodes) => nodes.map((n) => n.getAttribute('data-state')));

describe.skipIf(!hasChromium)('the statecharts in chromium', () => {
  beforeAll(async () => {
    store = new SqliteSessionStore({ path: join(root, 'sessions.db') });
    const session = await DurableSession.open({ machine: liveAgent(), store, sessionId: 'one' });
    session.send({ type: 'input', message: 'Hello.' });
    await session.whenIdle();
    await session.close();
    viewer = await startViewer({ store, port: 0 });
    mkdirSync(ARTIFACTS, { recursive: true });
    context = await launchChromium(join(root, 'profile'), { viewport: { width: 1400, height: 900 } });
    page = context.pages()[0] ?? (await context.newPage());
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    await viewer?.close();
    await store?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('both charts: compound states inside their parents, guards on the edges, no overlap, nothing clipped', async () => {
    await unfolded(page, `${viewer.url}s/one`);
    for (const chart of ['brain', 'driver']) {
      const g = await geometryOf(page, chart);
      expect(problems(g), chart).toEqual([]);
      // Every state lies inside its parent's box.
      const byId = new Map(g.states.map((s) => [s.id, s.box]));
      for (const s of g.states) {
        const parent = s.id.includes('.') ? s.id.slice(0, s.id.lastIndexOf('.')) : null;
        if (parent) expect(inside(s.box, byId.get(parent)!), `${s.id} inside ${parent}`).toBe(true);
      }
      await page.locator(`svg[data-chart="${chart}"]`).screenshot({ path: join(ARTIFACTS, `chart-${chart}.png`) });
    }
    const brain = await edgeTexts(page, 'brain');
    for (const label of ['modelResponse [feedIsValid && replyHasToolCalls]', 'next [atEmergencyLine]', 'compactionResult [feedIsValid && compactionMadeNoProgress && stallIsDeferrable]']) {
      expect(containing(brain, label), label).toBe(true);
    }
    const driver = await edgeTexts(page, 'driver');
    for (const label of ['resume [runInFlight]', 'always [needsApprovalCheck]']) expect(containing(driver, label), label).toBe(true);
    expect((await geometryOf(page, 'driver')).states.map((s) => s.id)).toContain('Running.AwaitingTools.Working.Approval.AwaitingApproval');
  });

  it('the current state is highlighted, and the selected step lights its brain and driver states', async () => {
    await unfolded(page, `${viewer.url}s/one`);
    expect(await marked(page, 'brain', 'current')).toEqual(['Terminal']);
    expect(await marked(page, 'driver', 'current')).toEqual(['Idle']);
    const kinds = await page.locator('#timeline .row').evaluateAll((rows) => rows.map((row) => (row as HTMLElement).dataset.kind));
    await page.locator(`#row-${kinds.indexOf('model')}`).click();
    expect(await marked(page, 'brain', 'selected')).toEqual(['AwaitingModel']);
    expect(await marked(page, 'driver', 'selected')).toEqual(['Running.AwaitingModel']);
    expect(await marked(page, 'driver', 'selected-within')).toEqual(['Running']);
  });

  it("any inspected machine's chart is laid out too", async () => {
    const inspector = viewerInspector();
    try {
      const url = await inspector.ready;
      const machine = createMachine({
        id: 'door',
        initial: 'closed',
        states: {
          closed: { on: { open: { target: 'opened', guard: 'unlocked' }, lock: 'locked' } },
          locked: { on: { unlock: 'closed' } },
          opened: { initial: 'swinging', states: { swinging: { on: { stop: 'still' } }, still: {} }, on: { close: 'closed' } },
        },
      }, { guards: { unlocked: () => true } });
      const actor = createActor(machine, { inspect: inspector.inspect }).start();
      await page.goto(`${url}a/${encodeURIComponent(actor.sessionId)}`);
      await page.waitForSelector('svg[data-chart="brain"] .node');
      const g = await geometryOf(page, 'brain');
      expect(problems(g)).toEqual([]);
      expect(g.states.map((s) => s.id).sort()).toEqual(['closed', 'locked', 'opened', 'opened.still', 'opened.swinging']);
      expect(await edgeTexts(page, 'brain')).toContain('open [unlocked]');
      expect(await marked(page, 'brain', 'current')).toEqual(['closed']);
      expect(await page.locator('svg[data-chart="driver"]').count()).toBe(0);
    } finally {
      await inspector.close();
    }
  });

  it('the geometry check fails on overlapping labels and on a clipped box (a canary: the check can fail)', () => {
    const box = { x: 10, y: 10, width: 50, height: 10 };
    const g: Geometry = { viewport: { x: 0, y: 0, width: 100, height: 100 }, states: [], labels: [{ text: 'a', kind: 'edge', owner: '', box }, { text: 'b', kind: 'edge', owner: '', box: { ...box, x: 40 } }], edges: [] };
    expect(problems(g)).toEqual(["labels overlap: 'a' and 'b'"]);
    expect(problems({ ...g, labels: [], states: [{ id: 's', box: { ...box, x: 80 } }] })[0]).toMatch(/^clipped/);
    expect(problems({ ...g, labels: [g.labels[0]!], states: [{ id: 's', box: { x: 0, y: 0, width: 20, height: 20 } }] })).toEqual(["label 'a' (of the chart) overlaps state s"]);
  });
});
