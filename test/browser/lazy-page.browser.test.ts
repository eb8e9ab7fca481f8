/**
 * What keeps a big session's page small, without a browser (issue 24 item 5): long texts as
 * markers with their own islands after the page script (escaped, exact when parsed back, no
 * stored string can pass for a marker), the log's end only, a live page's trace cut after its
 * first entries, the viewer's trace cache reading only what was stored since, and a session's
 * log read again only once its version changed.
 */
import { describe, expect, it } from 'vitest';
import { readSessionTrace } from '../../src/sessions/trace.js';
import { MemorySessionStore } from '../../src/stores/memory.js';
import type { SessionStore } from '../../src/stores/session-store.js';
import { LAZY_HEAD, LAZY_TEXT_OVER, LazyTexts, lazyTextId, parseLazy, shownText } from '../../src/viewer/lazy-text.js';
import { loadSessionView } from '../../src/viewer/load.js';
import { FIRST_ENTRIES, sessionPage } from '../../src/viewer/page.js';
import { LOG_SHOWN, type PageData } from '../../src/viewer/page-model.js';
import { rowsOf } from '../../src/viewer/rows.js';
import { TraceCache } from '../../src/viewer/trace-cache.js';
import { writeBigSession } from '../viewer/fixtures/big-session.js';

const HOSTILE = `</script><script>window.pwned = 1</script><!-- \u2028\u2029 & "quotes" `;
const island = (html: string, id: string) => {
  const match = new RegExp(`<script type="application/json" id="${id}">([\\s\\S]*?)</script>`).exec(html);
  return match ? (JSON.parse(match[1]!) as unknown) : undefined;
};

async function page(store: SessionStore, sessionId: string, live: boolean): Promise<string> {
  const session = (await loadSessionView(store, sessionId))!;
  const data: PageData = { mode: 'session', live, eventsUrl: null, chart: { id: 'c', states: [], transitions: [] }, driver: { id: 'd', states: [], transitions: [] }, layouts: { chart: null, driver: null }, session };
  return sessionPage(data, 'void 0');
}

describe('long texts as markers', () => {
  it('replaces long strings by markers, once per distinct text, without changing its input', () => {
    const long = 'x'.repeat(LAZY_TEXT_OVER + 1);
    const input = { a: long, b: [long, 'short'], c: { d: `${long}y` } };
    const texts = new LazyTexts();
    const lifted = texts.lift(input);
    expect(input.a).toBe(long);
    expect(texts.texts).toEqual([long, `${long}y`]);
    expect(parseLazy(lifted.a)).toEqual({ length: long.length, index: 0, head: long.slice(0, LAZY_HEAD) });
    expect(parseLazy(lifted.b[0]!)!.index).toBe(0);
    expect(lifted.b[1]).toBe('short');
    expect(parseLazy(lifted.c.d)!.index).toBe(1);
    expect(shownText(lifted.a)).toBe(long.slice(0, LAZY_HEAD));
    expect(texts.lift('x'.repeat(LAZY_TEXT_OVER))).toBe('x'.repeat(LAZY_TEXT_OVER));
  });

  it('a stored string that looks like a marker is lifted too: it expands to itself, never to another text', () => {
    const texts = new LazyTexts();
    texts.lift('y'.repeat(LAZY_TEXT_OVER + 1));
    const spoof = '\u0000lazy:5:0:hello';
    const marker = texts.lift(spoof);
    expect(parseLazy(marker)!.index).toBe(1);
    expect(texts.texts[1]).toBe(spoof);
  });
});

describe('a session page', () => {
  it('keeps a long text out of the page data: its own escaped island, exact when parsed, and titles from its head', async () => {
    // A session whose tool result is a long text that tries to end its script element.
    const text = HOSTILE + '.'.repeat(LAZY_TEXT_OVER * 2);
    const source = new MemorySessionStore();
    await writeBigSession(source, 'h', 4);
    const records = await source.readTrace!('h');
    const stored = (await source.load('h'))!;
    const store = new MemorySessionStore();
    await store.apply('h', { expectedVersion: 0, state: stored.state, append: stored.messages });
    await store.appendTrace!('h', records.map(({ entry }) => {
      const e = entry as { type: string; result?: { content: string } };
      return e.type === 'tool' ? { ...e, result: { ...e.result!, content: text } } : e;
    }));
    const hostile = { store, text };
    const html = await page(hostile.store, 'h', false);
    // Every script element is one of ours: the stored text ended none of them early.
    expect(html.match(/<script\b/g)!.length).toBe(html.match(/<\/script>/g)!.length);
    expect(html).not.toContain('<script>window.pwned');
    const data = island(html, 'loopchart-data') as PageData;
    const entries = island(html, 'loopchart-trace') as PageData['session']['trace'];
    expect(JSON.stringify(entries)).not.toContain(hostile.text);
    const tool = entries.find((r) => 'entry' in r && r.entry.type === 'tool')!;
    const marker = parseLazy(('entry' in tool && tool.entry.type === 'tool' && tool.entry.result!.content) || '')!;
    expect(marker.length).toBe(hostile.text.length);
    expect(island(html, lazyTextId(marker.index))).toBe(hostile.text);
    // The lazy islands come after the page script: the page is drawn before the browser reads them.
    expect(html.indexOf(`id="${lazyTextId(marker.index)}"`)).toBeGreaterThan(html.indexOf('void 0'));
    const rows = rowsOf({ session: { ...data.session, trace: entries } });
    const toolRow = rows.rows.find((row) => row.kind === 'tool')!;
    expect(toolRow.title).toContain('</script><script>window.pwned');
    expect(toolRow.title).not.toContain('\u0000');
    expect(toolRow.detail().blocks.find(([label]) => label === 'result')![1]).toBe('entry' in tool && tool.entry.type === 'tool' ? tool.entry.result!.content : '');
  });

  it("holds the log's last messages, and a live page only the trace's start (the export all of it)", async () => {
    const store = new MemorySessionStore();
    await writeBigSession(store, 'long', 2 * FIRST_ENTRIES + 2);
    const live = await page(store, 'long', true);
    const data = island(live, 'loopchart-data') as PageData;
    expect(data.session.messages).toHaveLength(LOG_SHOWN);
    expect(data.session.logFrom).toBe(2 * FIRST_ENTRIES + 2 - LOG_SHOWN);
    expect((island(live, 'loopchart-trace') as unknown[]).length).toBe(FIRST_ENTRIES);
    const all = await readSessionTrace(store, 'long');
    expect(data.session.traceTo).toBe(all.at(-1)!.seq);
    const exported = await page(store, 'long', false);
    expect((island(exported, 'loopchart-trace') as unknown[]).length).toBe(all.length);
    expect((island(exported, 'loopchart-data') as PageData).session.traceTo).toBeUndefined();
  });
});

describe('the trace cache', () => {
  it('reads only what was stored since, and keeps an invalid row as its reason', async () => {
    const inner = new MemorySessionStore();
    await writeBigSession(inner, 's', 6);
    const reads: number[] = [];
    let bad = false;
    const store: SessionStore = Object.assign(Object.create(inner) as SessionStore, {
      readTrace: async (id: string, after = 0) => {
        reads.push(after);
        const records = await inner.readTrace!(id, after);
        return bad ? [...records, { seq: 999, entry: { type: 'model', turn: 'not a number' } }] : records;
      },
    });
    const cache = new TraceCache(store);
    const first = await cache.read('s');
    const last = first.entries.at(-1)!.seq;
    await inner.appendTrace!('s', [{ type: 'prune', at: 1, pruned: 1, before: 10, after: 5 }]);
    bad = true;
    const second = await cache.read('s');
    expect(reads).toEqual([0, last]);
    expect(second.entries).toHaveLength(first.entries.length + 2);
    expect(second.json).toHaveLength(second.entries.length);
    expect(first.entries).toHaveLength(second.entries.length - 2);
    const invalid = second.entries.at(-1)!;
    expect('invalid' in invalid && invalid.invalid).toMatch(/turn/);
  });
});

describe("a page's session log", () => {
  it('is read from the store once per stored version: a second page of an unchanged session reads it no more', async () => {
    const store = new MemorySessionStore();
    await writeBigSession(store, 'v', 6);
    const loads: string[] = [];
    const load = store.load.bind(store);
    store.load = (id) => (loads.push(id), load(id));
    const first = (await loadSessionView(store, 'v'))!;
    const again = (await loadSessionView(store, 'v'))!;
    expect(loads).toEqual(['v']);
    expect(again.messages).toEqual(first.messages);
    // A step stored since: read again, and the page shows it.
    const stored = (await load('v'))!;
    await store.apply('v', { expectedVersion: stored.version, state: stored.state, append: [{ role: 'user', content: 'one more' }] });
    const changed = (await loadSessionView(store, 'v'))!;
    expect(loads).toEqual(['v', 'v']);
    expect(changed.messages.at(-1)!.content).toBe('one more');
    expect(changed.version).toBe(stored.version + 1);
  });
});
