/**
 * The viewer's side-by-side page over real HTTP: an eval case's recorded run and its new run (kept
 * in the same store by runEval's `store`), decision by decision, the first difference marked at the
 * step the evals report; stored text escaped; 404 for an unknown session; routed by the path alone.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { loadDataset, saveCases } from '../../src/evals/dataset.js';
import { recordCase } from '../../src/evals/record.js';
import { comparePath, formatJson, formatTable } from '../../src/evals/report.js';
import { runCase } from '../../src/evals/run-case.js';
import { runEval, type EvalReport } from '../../src/evals/run-eval.js';
import { sameDecisions } from '../../src/evals/scorers.js';
import type { ScriptEntry } from '../../src/models/scripted.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { startViewer, type RunningViewer } from '../../src/viewer/server.js';
import { recordSession, supportAgent } from '../evals/support.js';
import { get as getFrom } from './support.js';

const dir = mkdtempSync(join(tmpdir(), 'loopchart-viewer-compare-'));
const storePath = join(dir, 'store.db');
const dataset = join(dir, 'dataset');
/** A session id and a tool argument with markup: both must show as text. */
const RECORDED = 'support-<b>7</b>';
const SCRIPT: ScriptEntry[] = [{ toolCalls: [{ name: 'lookup', args: { order: '<i>A1</i>' } }] }, { text: 'Order A1 was delivered.' }];

let store: SqliteSessionStore;
let viewer: RunningViewer;
let changed: EvalReport;
let same: EvalReport;

beforeAll(async () => {
  store = new SqliteSessionStore({ path: storePath });
  await recordSession(store, RECORDED, supportAgent(SCRIPT));
  await saveCases(dataset, [await recordCase(store, RECORDED)]);
  // The changed agent answers at once; the unchanged one decides as recorded.
  changed = await runEval({ dataset, agent: () => supportAgent([{ text: 'It is on its way.' }]), store, runId: 'changed', scorers: [sameDecisions()] });
  same = await runEval({ dataset, agent: () => supportAgent(SCRIPT), store, runId: 'same', scorers: [sameDecisions()] });
  viewer = await startViewer({ store, port: 0, storeLabel: 'store.db' });
});
afterAll(async () => {
  await viewer?.close();
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** One request to the viewer (its own Host unless `headers` say otherwise). */
const get = (path: string, headers?: Record<string, string>, method?: string) => getFrom(viewer.port, path, headers, method);

/** The table's rows: each row's id, class and cells as text (markup removed, entities kept). */
function rows(body: string): { id: string; cls: string; cells: string[] }[] {
  return [...body.matchAll(/<tr id="([^"]+)"(?: class="([^"]+)")?>\n([\s\S]*?)\n<\/tr>/g)].map((match) => ({
    id: match[1]!,
    cls: match[2] ?? '',
    cells: [...match[3]!.matchAll(/<td[^>]*>([\s\S]*?)<\/td>/g)].map((cell) => cell[1]!.replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' ').trim()),
  }));
}

const kept = (report: EvalReport) => report.cases[0]!.run!;

describe('the viewer compares a recorded run with its new run', () => {
  it('runEval keeps each new run in the store and names both sessions in the report', () => {
    const run = kept(changed);
    expect(run.sessionId).toBe('eval-changed-support--b-7--b-');
    expect(run.recordedSessionId).toBe(RECORDED);
    const json = JSON.parse(formatJson(changed)) as { cases: { run: { sessionId: string; recordedSessionId: string } }[] };
    expect(json.cases[0]!.run).toMatchObject({ sessionId: run.sessionId, recordedSessionId: RECORDED });
    // The table prints the page of each case that decides otherwise, under the viewer's address.
    expect(formatTable(changed, { viewerUrl: 'http://127.0.0.1:4317/' })).toContain(`    side by side: http://127.0.0.1:4317${comparePath(RECORDED, run.sessionId!)}`);
    expect(formatTable(same)).not.toContain('side by side');
  });

  it('shows both runs step by step, the first difference marked where the evals report it, stored text escaped', async () => {
    const run = kept(changed);
    const page = await get(comparePath(RECORDED, run.sessionId!));
    expect(page.status).toBe(200);
    expect(page.body).toContain('<th>recorded: decision and rule</th><th>new: decision and rule</th>');
    const table = rows(page.body);
    expect(table.map((row) => row.id)).toEqual(['step-1', 'first-difference', 'step-3', 'step-4']);
    // The marked step is the one runEval's difference names: the page reuses it, it does not diff again.
    expect(run.difference!.step).toBe(2);
    const marked = table.filter((row) => row.cls === 'first-difference');
    expect(marked).toHaveLength(1);
    expect(marked[0]!.cells).toEqual([
      '2 first difference',
      'run 1 · tools call tools lookup({&quot;order&quot;:&quot;&lt;i&gt;A1&lt;/i&gt;&quot;}) brain: CallTools (the reply asked for tools)',
      'run 1 · done done: Completed brain: the reply asked for no tool (the run completes)',
    ]);
    expect(table[0]!.cells[1]).toBe(table[0]!.cells[2]);
    expect(table[0]!.cells[1]).toContain('call the model (turn 1) offering [lookup, refund]');
    expect(table.slice(2).map((row) => [row.cls, row.cells[2]])).toEqual([
      ['after-difference', 'the new run ends here'],
      ['after-difference', 'the new run ends here'],
    ]);
    expect(page.body).toContain('The runs part at <a href="#first-difference">step 2</a> (run 1).');
    // Each side links to its session's page; the ids and arguments show as text, never as markup.
    expect(page.body).toContain(`<a href="/s/${encodeURIComponent(RECORDED)}">support-&lt;b&gt;7&lt;/b&gt;</a>`);
    expect(page.body).toContain(`<a href="/s/${run.sessionId}">${run.sessionId}</a>`);
    expect(page.body).not.toMatch(/<b>7|<i>A1|<script/);
  });

  it('runs that decide alike: every step side by side, nothing marked', async () => {
    expect(kept(same).difference).toBeNull();
    const page = await get(comparePath(RECORDED, kept(same).sessionId!));
    expect(page.status).toBe(200);
    expect(page.body).toContain('The runs decide alike at every step (4 decisions).');
    const table = rows(page.body);
    expect(table.map((row) => row.id)).toEqual(['step-1', 'step-2', 'step-3', 'step-4']);
    for (const row of table) expect(row.cells[1]).toBe(row.cells[2]);
    expect(page.body).not.toMatch(/id="first-difference"|class="first-difference"|class="marker"/);
  });

  it('an unknown session on either side is a 404 naming it (escaped); a path of another shape is a 404', async () => {
    const run = kept(changed);
    const left = await get(comparePath('<u>nobody</u>', run.sessionId!));
    expect(left.status).toBe(404);
    expect(left.body).toContain('There is no session &#39;&lt;u&gt;nobody&lt;/u&gt;&#39; in store.db');
    const right = await get(comparePath(RECORDED, 'eval-none'));
    expect(right).toMatchObject({ status: 404, body: expect.stringContaining('There is no session &#39;eval-none&#39; in store.db') });
    for (const path of ['/compare', `/compare/${encodeURIComponent(RECORDED)}`, `${comparePath(RECORDED, run.sessionId!)}/more`, '/compare/%E0%A4%A/x', '/compare/a%00b/x']) {
      expect([path, (await get(path)).status]).toEqual([path, 404]);
    }
  });

  it('is routed by the path alone, behind the same request checks as every page', async () => {
    const path = comparePath(RECORDED, kept(changed).sessionId!);
    const plain = await get(path);
    expect((await get(`${path}?step=4&recorded=x`)).body).toBe(plain.body);
    // A target that is not a path is refused, never read for a host.
    expect((await get(`http://127.0.0.1:${viewer.port}${path}`)).status).toBe(400);
    expect((await get(path, { host: `127.0.0.1:${viewer.port}` }, 'POST')).status).toBe(405);
    expect((await get(path, { host: `evil.example:${viewer.port}` })).status).toBe(421);
    expect((await get(path, { host: `127.0.0.1:${viewer.port}`, origin: 'http://evil.example' })).status).toBe(403);
  });

  it('runCase never resumes a stored session as a new run', async () => {
    const { cases } = await loadDataset(dataset);
    await expect(runCase(cases[0]!, supportAgent(SCRIPT), { store, sessionId: RECORDED })).rejects.toThrow(
      `case 'support--b-7--b-': session '${RECORDED}' already exists in the store: a new run needs a new session id`,
    );
  });

  it('loopchart eval --keep-runs keeps the runs in the store and prints the page of a case that decides otherwise', async () => {
    const module = join(dir, 'changed-agent.ts');
    writeFileSync(module, `import { supportAgent } from ${JSON.stringify(fileURLToPath(new URL('../evals/support.ts', import.meta.url)))};\nexport const agent = () => supportAgent([{ text: 'It is on its way.' }]);\n`);
    const out: string[] = [];
    const code = await main(['eval', dataset, '--agent', module, '--keep-runs', '--store', storePath, '--results', join(dir, 'cli.jsonl')], { out: (line) => out.push(line), err: () => {} });
    // The default scorers set no threshold: the gate holds, and the difference is still printed with its page.
    expect(code).toBe(0);
    const link = /side by side: (http:\/\/127\.0\.0\.1:4317)(\/compare\/\S+)/.exec(out.join('\n'));
    expect(link).not.toBeNull();
    const page = await get(link![2]!);
    expect(page.status).toBe(200);
    expect(rows(page.body).filter((row) => row.cls === 'first-difference').map((row) => row.cells[0])).toEqual(['2 first difference']);
  });
});
