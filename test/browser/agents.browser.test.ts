/**
 * Agents inside agents in `loopchart view` (issue 22), in Debian's chromium: after a handoff the
 * session page names the agent that has the conversation and who handed it over, and the
 * timeline has the handoff; a subagent's tool call opens the child session's own page.
 * Skipped without /usr/bin/chromium, like the rest of the browser project.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext } from 'playwright-core';
import { hasChromium, launchChromium } from './support/chromium.js';
import { afterAll, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { agentTool } from '../../src/agent/subagents/agent-tool.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { startViewer, type RunningViewer } from '../../src/viewer.js';

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

async function browse() {
  viewer ??= await startViewer({ store: store!, port: 0, storeLabel: 'h.db' });
  context ??= await launchChromium(join(root, 'profile'));
  return context.pages()[0] ?? (await context.newPage());
}

describe.skipIf(!hasChromium)('agents in the viewer', () => {
  store = new SqliteSessionStore({ path: join(root, 'h.db') });

  it('after a handoff: shows the active agent among the facts and the handoff in the timeline', async () => {
    const machine = createAgentMachine({
      model: scriptedModel([{ toolCalls: [{ id: 't1', name: 'transfer_to_billing', args: {} }] }]),
      handoffs: { name: 'triage', agents: [{ name: 'billing', description: 'Refunds.', model: scriptedModel([{ text: 'unused' }, { text: 'Billing here.' }]) }] },
    });
    const session = await DurableSession.open({ machine, store: store!, sessionId: 'desk' });
    session.send({ type: 'input', message: 'Refund please.' });
    await session.whenIdle();
    await session.close();
    const page = await browse();
    await page.goto(`${viewer!.url}s/desk`);
    await page.waitForSelector('#timeline .row');
    expect(await page.locator('[data-fact="agent"] dd').textContent()).toBe('billing (handed over by triage)');
    const kinds = await page.locator('#timeline .row').evaluateAll((rows) => rows.map((row) => (row as HTMLElement).dataset.kind));
    expect(kinds).toContain('handoff');
    expect(await page.locator('#timeline .row[data-kind="handoff"]').innerText()).toContain('triage → billing');
  }, 60_000);

  it("a subagent's tool call links to the child session, whose page opens", async () => {
    const child = createAgentMachine({ model: scriptedModel([{ text: 'child answer' }]) });
    const machine = createAgentMachine({
      model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'helper', args: { task: 'help' } }] }, { text: 'parent answer' }]),
      tools: [agentTool({ agent: child, name: 'helper', description: 'Helps.' })],
    });
    const session = await DurableSession.open({ machine, store: store!, sessionId: 'boss' });
    session.send({ type: 'input', message: 'Go.' });
    await session.whenIdle();
    await session.close();
    const page = await browse();
    await page.goto(`${viewer!.url}s/boss`);
    await page.waitForSelector('#timeline .row');
    await page.locator('#timeline .row[data-kind="tool"]').click();
    const link = page.locator('[data-child-session]');
    expect(await link.getAttribute('data-child-session')).toBe('boss/run-1:turn-1:c1');
    await link.click();
    await page.waitForSelector('#timeline .row');
    expect(await page.locator('#session-id').textContent()).toBe('boss/run-1:turn-1:c1');
    expect(await page.locator('[data-fact="outcome"] dd').first().textContent()).toBe('Completed');
    expect(await page.locator('#log').innerText()).toContain('child answer');
  }, 60_000);
});
