/**
 * A handoff in `loopchart view` (issue 22 item 2), in Debian's chromium: the session page names
 * the agent that has the conversation and who handed it over, and the timeline has the handoff.
 * Skipped without /usr/bin/chromium, like the rest of the browser project.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { startViewer, type RunningViewer } from '../../src/viewer.js';

const CHROMIUM = '/usr/bin/chromium';
const root = mkdtempSync(join(tmpdir(), 'loopchart-browser-handoff-'));
let context: BrowserContext | undefined;
let viewer: RunningViewer | undefined;
let store: SqliteSessionStore | undefined;
afterAll(async () => {
  await context?.close();
  await viewer?.close();
  await store?.close();
  rmSync(root, { recursive: true, force: true });
});

describe.skipIf(!existsSync(CHROMIUM))('a handoff in the viewer', () => {
  it('shows the active agent among the facts and the handoff in the timeline', async () => {
    store = new SqliteSessionStore({ path: join(root, 'h.db') });
    const machine = createAgentMachine({
      model: scriptedModel([{ toolCalls: [{ id: 't1', name: 'transfer_to_billing', args: {} }] }]),
      handoffs: { name: 'triage', agents: [{ name: 'billing', description: 'Refunds.', model: scriptedModel([{ text: 'unused' }, { text: 'Billing here.' }]) }] },
    });
    const session = await DurableSession.open({ machine, store, sessionId: 'desk' });
    session.send({ type: 'input', message: 'Refund please.' });
    await session.whenIdle();
    await session.close();
    viewer = await startViewer({ store, port: 0, storeLabel: 'h.db' });
    context = await chromium.launchPersistentContext(join(root, 'profile'), { executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] });
    const page = context.pages()[0] ?? (await context.newPage());
    await page.goto(`${viewer.url}s/desk`);
    await page.waitForSelector('#timeline .row');
    expect(await page.locator('[data-fact="agent"] dd').textContent()).toBe('billing (handed over by triage)');
    const kinds = await page.locator('#timeline .row').evaluateAll((rows) => rows.map((row) => (row as HTMLElement).dataset.kind));
    expect(kinds).toContain('handoff');
    expect(await page.locator('#timeline .row[data-kind="handoff"]').innerText()).toContain('triage → billing');
  }, 60_000);
});
