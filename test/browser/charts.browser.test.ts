/**
 * Charts a reader can read (issue 43, item 5), in chromium: a session page never scrolls
 * sideways whatever the charts' size; each chart opens fitted to its box with something drawn in
 * the visible part (the driver's used to open blank, its content off-screen); the current state
 * (here deep in the driver: waiting for an approval) is unfolded and in view on first load; no
 * two labels overlap in any view; no state receives a comb of edges (a hub's sources end at jump
 * boxes); compound states fold and unfold from their titles; zoom and pan move the picture, not
 * the page. Screenshots of both charts go to /work/notes/ (and test/browser/artifacts/).
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { exportSessionHtml, startViewer, type RunningViewer } from '../../src/viewer.js';
import { hasChromium, launchChromium } from './support/chromium.js';

const ARTIFACTS = fileURLToPath(new URL('./artifacts/', import.meta.url));
/** Where the closing note's pictures go (the lead's notes folder, when there is one). */
const NOTES = process.env.LOOPCHART_CHART_SHOTS ?? '/work/notes';
const WAITING = 'Running.AwaitingTools.Working.Approval.AwaitingApproval';

const root = mkdtempSync(join(tmpdir(), 'loopchart-charts-'));
let context: BrowserContext;
let page: Page;
let viewer: RunningViewer;
let store: SqliteSessionStore;

/** A session closed while its run waits for a person to approve a tool call. */
async function waitingSession(): Promise<void> {
  const write = defineTool({ name: 'write', description: 'Writes (asks first).', input: z.object({ text: z.string() }), needsApproval: true, execute: () => 'wrote' });
  const machine = createAgentMachine({ model: scriptedModel([{ toolCalls: [{ name: 'write', args: { text: 'hi' } }] }, { text: 'done' }]), tools: [write] });
  let asked!: () => void;
  const requested = new Promise<void>((resolve) => (asked = resolve));
  const session = await DurableSession.open({ machine, store, sessionId: 'waiting', attach: (actor) => actor.on('approval.requested', () => asked()) });
  session.send({ type: 'input', message: 'Write hi.' });
  await Promise.race([requested, new Promise((_, reject) => setTimeout(() => reject(new Error('no approval request within 10 s')), 10_000))]);
  await session.close();
}

interface Rect {
  x: number;
  y: number;
  width: number;
  height: number;
}
const intersects = (a: Rect, b: Rect) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
const inside = (a: Rect, b: Rect, slack = 1) => a.x >= b.x - slack && a.y >= b.y - slack && a.x + a.width <= b.x + b.width + slack && a.y + a.height <= b.y + b.height + slack;

/** What the reader sees of one chart: the frame on screen, the states and labels on screen, the drawn view's geometry. */
const seen = (p: Page, chart: string) =>
  p.evaluate((name) => {
    const rect = (e: Element) => {
      const r = e.getBoundingClientRect();
      return { x: r.x, y: r.y, width: r.width, height: r.height };
    };
    const frame = document.querySelector(`[data-frame="${name}"]`)!;
    const svg = frame.querySelector<SVGSVGElement>('svg')!;
    const bbox = (e: SVGGraphicsElement) => {
      const b = e.getBBox();
      return { x: b.x, y: b.y, width: b.width, height: b.height };
    };
    return {
      frame: rect(frame),
      window: { x: 0, y: 0, width: window.innerWidth, height: window.innerHeight },
      size: { x: 0, y: 0, width: Number(svg.dataset.width), height: Number(svg.dataset.height) },
      states: [...svg.querySelectorAll<SVGGElement>('.node')].map((g) => ({ id: g.dataset.state!, cls: g.getAttribute('class')!, screen: rect(g.querySelector('rect.box')!), box: bbox(g.querySelector<SVGRectElement>('rect.box')!) })),
      labels: [...svg.querySelectorAll<SVGTextElement>('text.label')].map((t) => ({ text: t.textContent!, owner: t.dataset.owner ?? '', box: bbox(t), screen: rect(t) })),
      edgesInto: [...svg.querySelectorAll<SVGGElement>('g.edge:not(.to-jump)')].map((g) => g.dataset.to!),
      jumps: svg.querySelectorAll('.jump').length,
    };
  }, chart);

/** What is wrong with a drawn view: overlapping labels, a label on a state it does not belong to, anything outside the view's size, a comb. */
function problems(g: Awaited<ReturnType<typeof seen>>): string[] {
  const found: string[] = [];
  const owns = (state: string, owner: string) => owner === state || owner.startsWith(`${state}.`);
  for (const [i, a] of g.labels.entries()) {
    for (const b of g.labels.slice(i + 1)) if (intersects(a.box, b.box)) found.push(`labels overlap: '${a.text}' and '${b.text}' ${JSON.stringify([a.box, b.box])}`);
    for (const s of g.states) if (!owns(s.id, a.owner) && intersects(a.box, s.box) && !s.cls.includes('compound')) found.push(`label '${a.text}' overlaps state ${s.id}`);
  }
  for (const item of [...g.states.map((s) => s.box), ...g.labels.map((l) => l.box)]) if (!inside(item, g.size)) found.push(`outside the chart: ${JSON.stringify(item)}`);
  const into = new Map<string, number>();
  for (const to of g.edgesInto) into.set(to, (into.get(to) ?? 0) + 1);
  for (const [to, n] of into) if (n > 5) found.push(`${to} receives ${n} edges`);
  return found;
}

describe.skipIf(!hasChromium)('charts you can read', () => {
  beforeAll(async () => {
    store = new SqliteSessionStore({ path: join(root, 'sessions.db') });
    await waitingSession();
    viewer = await startViewer({ store, port: 0 });
    mkdirSync(ARTIFACTS, { recursive: true });
    context = await launchChromium(join(root, 'profile'), { viewport: { width: 1280, height: 900 } });
    page = context.pages()[0] ?? (await context.newPage());
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    await viewer?.close();
    await store?.close();
    rmSync(root, { recursive: true, force: true });
  });

  const open = async (p: Page, url: string) => {
    await p.goto(url);
    await p.waitForSelector('[data-frame="driver"][data-placed="true"]');
    await p.waitForSelector('[data-frame="brain"][data-placed="true"]');
  };

  it('the page is never wider than the window; both boxes open with the chart in sight and the current state unfolded and visible', async () => {
    for (const width of [1280, 760]) {
      await page.setViewportSize({ width, height: 900 });
      await open(page, `${viewer.url}s/waiting`);
      const widths = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, window: window.innerWidth }));
      expect(widths.scroll, `page width at ${width}`).toBeLessThanOrEqual(widths.window);
      for (const chart of ['brain', 'driver']) {
        await page.locator(`[data-frame="${chart}"]`).scrollIntoViewIfNeeded();
        const g = await seen(page, chart);
        expect(g.frame.x + g.frame.width, `${chart} frame within the window`).toBeLessThanOrEqual(g.window.width + 0.5);
        // Not blank: states with readable text in the visible part of the box.
        const visible = g.states.filter((s) => intersects(s.screen, g.frame));
        expect(visible.length, `${chart} states in sight`).toBeGreaterThan(1);
        expect(g.labels.filter((l) => inside(l.screen, g.frame)).length, `${chart} labels in sight`).toBeGreaterThan(2);
        // The current state (two in the driver: its parallel regions) is drawn (its holders unfolded), in its box and the window.
        const current = g.states.filter((s) => s.cls.split(' ').includes('current'));
        expect(current.length, `${chart}: the current state is drawn`).toBeGreaterThan(0);
        for (const state of current) {
          expect(inside(state.screen, g.frame), `${chart}: ${state.id} inside its box ${JSON.stringify(state.screen)} ${JSON.stringify(g.frame)}`).toBe(true);
          expect(inside(state.screen, g.window), `${chart}: ${state.id} inside the window`).toBe(true);
        }
        if (width === 1280) {
          for (const dir of [ARTIFACTS, NOTES]) {
            mkdirSync(dir, { recursive: true });
            await page.locator(`[data-frame="${chart}"]`).screenshot({ path: join(dir, `chart-${chart}-first-view.png`) });
          }
        }
      }
      const g = await seen(page, 'driver');
      expect(g.states.filter((s) => s.cls.split(' ').includes('current')).map((s) => s.id)).toContain(WAITING);
      expect((await seen(page, 'brain')).states.find((s) => s.cls.split(' ').includes('current'))!.id).toBe('AwaitingTools');
    }
  });

  it('every view of both charts: no overlapping labels, nothing outside, no comb; fold and unfold from the titles', async () => {
    await page.setViewportSize({ width: 1280, height: 900 });
    await open(page, `${viewer.url}s/waiting`);
    expect(problems(await seen(page, 'brain'))).toEqual([]);
    const tools = (name: string) => page.locator(`#chart-driver .chart-tool`, { hasText: new RegExp(`^${name}$`) });
    await tools('fold all').click();
    const folded = await seen(page, 'driver');
    expect(problems(folded)).toEqual([]);
    expect(folded.states.find((s) => s.id === 'Running')!.cls).toContain('folded');
    // Unfold Running from its title: its children appear, the deeper compound states stay folded.
    await page.locator('[data-frame="driver"] .node[data-state="Running"] > text.title').click();
    const running = await seen(page, 'driver');
    expect(problems(running)).toEqual([]);
    expect(running.states.map((s) => s.id)).toContain('Running.Start');
    expect(running.states.find((s) => s.id === 'Running.AwaitingTools')!.cls).toContain('folded');
    expect(running.jumps, 'the edges into Start end at jump boxes').toBeGreaterThan(5);
    await tools('unfold all').click();
    const all = await seen(page, 'driver');
    expect(problems(all)).toEqual([]);
    expect(all.states.map((s) => s.id)).toContain(WAITING);
    await tools('fit').click();
    for (const dir of [ARTIFACTS, NOTES]) await page.locator('[data-frame="driver"]').screenshot({ path: join(dir, 'chart-driver-unfolded-fit.png') });
    // Fold AwaitingTools again from its title.
    await page.locator('[data-frame="driver"] .node[data-state="Running.AwaitingTools"] > text.title').click();
    const again = await seen(page, 'driver');
    expect(again.states.map((s) => s.id)).not.toContain(WAITING);
    expect(again.states.find((s) => s.id === 'Running.AwaitingTools')!.cls).toContain('current-within');
  });

  it('selecting a step shows its states: a folded holder unfolds, the state comes into the box', async () => {
    await open(page, `${viewer.url}s/waiting`);
    await page.locator('#chart-driver .chart-tool', { hasText: /^fold all$/ }).click();
    expect((await seen(page, 'driver')).states.map((s) => s.id)).not.toContain('Running.AwaitingModel');
    const kinds = await page.locator('#timeline .row').evaluateAll((rows) => rows.map((row) => (row as HTMLElement).dataset.kind));
    await page.locator(`#row-${kinds.indexOf('model')}`).click();
    const g = await seen(page, 'driver');
    const selected = g.states.find((s) => s.id === 'Running.AwaitingModel');
    expect(selected?.cls).toContain('selected');
    expect(inside(selected!.screen, g.frame)).toBe(true);
  });

  it('zoom and pan move the picture inside its box; the page does not move sideways', async () => {
    await open(page, `${viewer.url}s/waiting`);
    const frame = page.locator('[data-frame="driver"]');
    await frame.scrollIntoViewIfNeeded();
    const scale = async () => Number(await frame.getAttribute('data-scale'));
    const viewBox = () => page.locator('[data-frame="driver"] svg').getAttribute('viewBox');
    const before = await scale();
    await page.locator('#chart-driver .chart-tool', { hasText: /^\+$/ }).click();
    expect(await scale()).toBeGreaterThan(before);
    const box = (await frame.boundingBox())!;
    const start = await viewBox();
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width / 2 - 120, box.y + box.height / 2 - 60, { steps: 4 });
    await page.mouse.up();
    expect(await viewBox()).not.toBe(start);
    await frame.focus();
    await page.keyboard.press('0');
    expect(await scale()).toBeLessThanOrEqual(1);
    const widths = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, window: window.innerWidth }));
    expect(widths.scroll).toBeLessThanOrEqual(widths.window);
  });

  it('an exported file fits the same way (no server, the same views)', async () => {
    const html = (await exportSessionHtml(store, 'waiting'))!;
    await page.setContent(html);
    await page.waitForSelector('[data-frame="driver"][data-placed="true"]');
    const widths = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, window: window.innerWidth }));
    expect(widths.scroll).toBeLessThanOrEqual(widths.window);
    const g = await seen(page, 'driver');
    expect(g.states.filter((s) => intersects(s.screen, g.frame)).length).toBeGreaterThan(1);
  });
});
