/**
 * The viewer's schedules list over real HTTP: each schedule of the store with its last and next
 * runs, read only, behind the same Host/Origin rules as every page; on a store that cannot hold
 * schedules the page has no list.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createAgentMachine } from '../../src/index.js';
import { listSchedules, schedule, startScheduler } from '../../src/schedules.js';
import { SqliteSessionStore } from '../../src/sqlite.js';
import { scriptedModel } from '../../src/testing.js';
import { startViewer } from '../../src/viewer.js';
import { sourcedSchedules } from '../../src/viewer/schedules.js';
import { get } from './support.js';

const dir = mkdtempSync(join(tmpdir(), 'loopchart-viewer-schedules-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The cells of the table row whose first cell is `id`, as text. */
function row(body: string, id: string): string[] {
  const rows = [...body.matchAll(/<tr[^>]*>\n([\s\S]*?)\n<\/tr>/g)].map((match) => [...match[1]!.matchAll(/<td[^>]*>([\s\S]*?)<\/td>/g)].map((cell) => cell[1]!.replace(/<[^>]+>/g, '')));
  const found = rows.find((cells) => cells[0] === id);
  if (!found) throw new Error(`no row '${id}' in ${body}`);
  return found;
}

describe('the viewer lists schedules', () => {
  it('each schedule with its next and last runs, its outcome and its session; read only; behind the Host and Origin checks', async () => {
    const store = new SqliteSessionStore({ path: join(dir, 'store.db') });
    const viewer = await startViewer({ store, port: 0, storeLabel: 'store.db' });
    try {
      await schedule(store, { id: 'nightly', session: 'reports', agent: 'reporter', input: 'Report.', cron: '0 2 * * *', timezone: 'Europe/Paris' });
      await schedule(store, { id: 'now', session: 'ticket-7', agent: 'reporter', input: 'Check the ticket.', at: Date.now() });
      await schedule(store, { id: '<b>bold</b>', session: 'x', agent: 'reporter', input: 'Go.', every: 60_000, paused: true });
      await schedule(store, { id: 'digest', session: 'ada-digest', agent: 'reporter', input: 'Digest.', every: 60_000, paused: true, scope: 'user:<ada>' });
      const scheduler = await startScheduler({ store, agents: { reporter: createAgentMachine({ model: scriptedModel([{ text: 'Done.' }]) }) }, maxIdleMs: 100 });
      // By id: the list is in creation order, and three schedules made in the same millisecond
      // come in id order ('<b>bold</b>' first).
      const byId = async (id: string) => (await listSchedules(store)).find((s) => s.id === id)!;
      try {
        for (let i = 0; i < 200 && (await byId('now')).lastOutcome === null; i++) await new Promise((resolve) => setTimeout(resolve, 25));
      } finally {
        await scheduler.stop();
      }
      const [nightly, now] = [await byId('nightly'), await byId('now')];
      const iso = (date: Date | null) => date!.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');

      const page = await get(viewer.port, '/schedules');
      expect(page.status).toBe(200);
      expect(page.body).toContain('<h1>Schedules in store.db</h1>');
      expect(row(page.body, 'nightly')).toEqual(['nightly', 'reporter', 'reports', 'cron 0 2 * * * (Europe/Paris)', 'active', iso(nightly!.nextAt), '—', '—', '0']);
      expect(row(page.body, 'now')).toEqual(['now', 'reporter', 'ticket-7', expect.stringMatching(/^once at 20\d\d-/), 'done', '—', iso(now!.lastFiredAt), 'Completed', '1']);
      expect(page.body).toContain('<a href="/s/ticket-7">ticket-7</a>');
      // Stored text is escaped: the id shows as text, never as markup.
      expect(row(page.body, '&lt;b&gt;bold&lt;/b&gt;')).toEqual(expect.arrayContaining(['paused', 'every 60 s']));
      expect(page.body).not.toContain('<b>bold</b>');
      // A schedule's memory scope is shown beside its session (escaped); one without has none.
      expect(row(page.body, 'digest')[2]).toBe('ada-digest (scope user:&lt;ada&gt;)');
      expect(row(page.body, 'nightly')[2]).toBe('reports');
      // Read only: nothing on the page acts, and the list is routed by the path alone.
      expect(page.body).not.toMatch(/<form|<button|<script>/);
      expect((await get(viewer.port, '/schedules?id=nightly')).status).toBe(200);
      expect((await get(viewer.port, '/schedules', { host: `127.0.0.1:${viewer.port}` }, 'POST')).status).toBe(405);
      expect((await get(viewer.port, '/schedules/nightly')).status).toBe(404);
      // The viewer's request checks hold here as on every page.
      expect((await get(viewer.port, '/schedules', { host: `evil.example:${viewer.port}` })).status).toBe(421);
      expect((await get(viewer.port, '/schedules', { host: `127.0.0.1:${viewer.port}`, origin: 'http://evil.example' })).status).toBe(403);
      // The sessions page links to it.
      expect((await get(viewer.port, '/')).body).toContain('<a href="/schedules">schedules</a>');
    } finally {
      await viewer.close();
      await store.close();
    }
  });

  it('on a store that cannot hold schedules the page has no list, and no error', async () => {
    const store = new SqliteSessionStore({ path: ':memory:' });
    const viewer = await startViewer({ store, port: 0 });
    try {
      const page = await get(viewer.port, '/schedules');
      expect(page.status).toBe(200);
      expect(page.body).toContain('This store cannot hold schedules.');
      expect(page.body).not.toContain('<table');
    } finally {
      await viewer.close();
      await store.close();
    }
  });

  it('from a source it is given (a restateScheduleClient, for one): its schedules under its label, checked as they come', async () => {
    const store = new SqliteSessionStore({ path: ':memory:' });
    const elsewhere = { id: 'remote', session: 'far', agent: 'loopchartSession', input: 'Go.', timing: { kind: 'every' as const, everyMs: 60_000, anchor: 0 }, timezone: 'UTC', missed: 'run-once' as const, overlap: 'skip' as const, paused: false, nextAt: new Date(Date.UTC(2030, 0, 1)), lastFiredAt: null, lastOutcome: null, lastError: null, runs: 0, firingBy: null };
    let listed: unknown[] = [elsewhere];
    const viewer = await startViewer({ store, port: 0, schedules: { label: 'the cluster', list: async () => listed as never } });
    try {
      const page = await get(viewer.port, '/schedules');
      expect(page.status).toBe(200);
      expect(page.body).toContain('<h1>Schedules in the cluster</h1>');
      expect(row(page.body, 'remote')).toEqual(['remote', 'loopchartSession', 'far', 'every 60 s', 'active', '2030-01-01 00:00:00Z', '—', '—', '0']);
      // A source that answers something else is an error page, not a page drawn from it; the
      // server's report (under the page's reference) names the source.
      listed = [{ ...elsewhere, nextAt: '<script>alert(1)</script>' }];
      const reported = vi.spyOn(console, 'error').mockImplementation(() => {});
      const bad = await get(viewer.port, '/schedules');
      const report = reported.mock.calls.map(([text, error]) => `${String(text)} ${(error as Error).message}`).join('\n');
      reported.mockRestore();
      expect(bad.status).toBe(500);
      expect(bad.body).toContain('Internal error');
      expect(bad.body).not.toContain('<script>alert(1)</script>');
      const reference = /reference ([0-9a-f]{8})/.exec(bad.body)![1]!;
      expect(report).toMatch(new RegExp(`reference ${reference}.*the schedules of the cluster cannot be read`));
      expect((await get(viewer.port, '/')).status).toBe(200);
    } finally {
      await viewer.close();
      await store.close();
    }
    await expect(startViewer({ store, port: 0, schedules: { lists: () => [] } as never })).rejects.toThrow(/schedules must be an object with a list\(\) function/);
  });

  it('a source that never answers is an error naming it after 30 s, not a page that hangs', async () => {
    vi.useFakeTimers();
    try {
      const listing = sourcedSchedules({ label: 'the cluster', list: () => new Promise(() => {}) });
      const failed = expect(listing).rejects.toThrow('the schedules of the cluster did not come within 30 s');
      await vi.advanceTimersByTimeAsync(29_999);
      let settled = false;
      void listing.catch(() => (settled = true));
      await vi.advanceTimersByTimeAsync(0);
      expect(settled).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      await failed;
    } finally {
      vi.useRealTimers();
    }
  });
});
