/**
 * The chat UI in a real browser: a React page on `useChat` (@ai-sdk/react 3, AI SDK 6), built
 * with Vite, served with createChatHandler by a child-process server over a SQLite file, the
 * offline scripted model streaming with delays. Streamed text and tool parts; an approval in the
 * page that runs the tool once; a reload mid-stream; a second tab; the server SIGKILLed mid-run
 * and restarted, the page finishing the turn. Each time the reply is there exactly once.
 *
 * Skipped when /usr/bin/chromium is absent (LOOPCHART_REQUIRE_CHROMIUM=1 makes that a failure).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNode, tsxCommand, type RunningChild } from '../sessions/fixtures/processes.js';
import { STORY } from './fixtures/chat-story.js';

const CHROMIUM = '/usr/bin/chromium';
const hasChromium = existsSync(CHROMIUM);
if (!hasChromium && process.env.LOOPCHART_REQUIRE_CHROMIUM) throw new Error(`${CHROMIUM} is missing and LOOPCHART_REQUIRE_CHROMIUM is set`);

const PAGE = fileURLToPath(new URL('./fixtures/chat-page/', import.meta.url));
const SERVER = fileURLToPath(new URL('./fixtures/chat-server.ts', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'loopchart-chat-'));
const db = join(root, 'chat.db');
const dist = join(root, 'page');

let context: BrowserContext;
let server: RunningChild;
let port = 0;
const transfers: string[] = [];

/** Starts the server (on `port` once it has one) and waits for it to listen. */
async function startServer(): Promise<void> {
  const listening = new Promise<number>((resolve, reject) => {
    server = startNode([...tsxCommand(SERVER).args, db, dist, String(port)], {
      timeoutMs: 600_000,
      onLine: (line) => {
        const match = /^listening (\d+)$/.exec(line);
        if (match) resolve(Number(match[1]));
        if (line.startsWith('transfer ')) transfers.push(line);
      },
    });
    server.done.then((run) => reject(new Error(`server exited: ${run.stderr}`)), reject);
  });
  port = await listening;
}

async function open(chat: string, target?: Page): Promise<Page> {
  const page = target ?? (await context.newPage());
  await page.goto(`http://127.0.0.1:${port}/?chat=${chat}`);
  await page.locator('#prompt').waitFor();
  return page;
}

async function ask(page: Page, text: string): Promise<void> {
  await page.fill('#prompt', text);
  await page.click('#send');
}

const assistantTexts = (page: Page) =>
  page.locator('.message[data-role=assistant]').evaluateAll((nodes) => nodes.map((node) => [...node.querySelectorAll('.text')].map((t) => t.textContent).join('|')));
const lastAnswer = async (page: Page) => (await assistantTexts(page)).at(-1) ?? '';
const ready = (page: Page) => page.waitForFunction(() => (window as unknown as { chatStatus?: string }).chatStatus === 'ready', null, { timeout: 30_000 });

/** Waits until the last answer shows part of the story, not all of it: mid-stream. */
async function midStory(page: Page): Promise<string> {
  await page.waitForFunction(
    (story) => {
      const texts = [...document.querySelectorAll('.message[data-role=assistant]')].map((n) => n.textContent ?? '');
      const last = texts.at(-1) ?? '';
      return last.length > 0 && last.length < story.length && story.startsWith(last);
    },
    STORY,
    { timeout: 20_000, polling: 20 },
  );
  return lastAnswer(page);
}

describe.skipIf(!hasChromium)('the chat UI in chromium', () => {
  beforeAll(async () => {
    const { build } = await import('vite');
    await build({ root: PAGE, configFile: false, logLevel: 'error', build: { outDir: dist, emptyOutDir: true, minify: false } });
    await startServer();
    context = await chromium.launchPersistentContext(join(root, 'profile'), {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    server?.kill();
    await server?.done.catch(() => {});
    rmSync(root, { recursive: true, force: true });
  });

  it('a question: streamed text and the tool part with its input and output', async () => {
    const page = await open('calc');
    await ask(page, 'What is 6 times 7?');
    // Text arrives before the reply is complete (streamed), then the tool part, then the answer.
    await page.waitForFunction(() => {
      const text = document.querySelector('.message[data-role=assistant] .text')?.textContent ?? '';
      return text.length > 0 && text !== 'Let me calculate that.';
    }, null, { timeout: 20_000, polling: 10 });
    const tool = page.locator('.tool[data-tool=calculator]');
    await expect.poll(() => tool.getAttribute('data-state'), { timeout: 20_000 }).toBe('output-available');
    expect(await tool.textContent()).toBe('calculator {"expression":"6*7"} output-available -> 42');
    await ready(page);
    expect(await assistantTexts(page)).toEqual(['Let me calculate that.|Six times seven is 42.']);
    await page.close();
  });

  it('an approval in the page: the tool waits, runs once when approved, and the run goes on', async () => {
    const page = await open('approve');
    await ask(page, 'Send 5 to Alice.');
    const tool = page.locator('.tool[data-tool=transfer]');
    await expect.poll(() => tool.getAttribute('data-state'), { timeout: 20_000 }).toBe('approval-requested');
    expect(transfers).toEqual([]);
    await page.click('.approve');
    await expect.poll(() => tool.getAttribute('data-state'), { timeout: 20_000 }).toBe('output-available');
    await expect.poll(() => lastAnswer(page), { timeout: 20_000 }).toBe('Sent the money.');
    await ready(page);
    expect(transfers).toEqual(['transfer 5']);
    // A reload shows the stored conversation, the tool still run once.
    await page.reload();
    await expect.poll(() => page.locator('.tool[data-tool=transfer]').getAttribute('data-state'), { timeout: 20_000 }).toBe('output-available');
    expect(transfers).toEqual(['transfer 5']);
    await page.close();
  });

  it('a reload mid-stream, and a second tab on the same chat: the answer completes once in each', async () => {
    const page = await open('reload');
    await ask(page, 'Tell me a story.');
    await midStory(page);
    const second = await open('reload');
    await page.reload();
    await page.locator('#prompt').waitFor();
    for (const tab of [page, second]) await expect.poll(() => assistantTexts(tab), { timeout: 20_000 }).toEqual([STORY]);
    await page.close();
    await second.close();
  });

  it('the server SIGKILLed mid-run and restarted: the page finishes the turn, no text twice', async () => {
    const page = await open('killed');
    await ask(page, 'Tell me another story.');
    await midStory(page);
    server.kill();
    await server.done;
    await startServer();
    await expect.poll(() => assistantTexts(page), { timeout: 40_000 }).toEqual([STORY]);
    await ready(page);
    // And after a reload, from the store.
    await page.reload();
    await expect.poll(() => assistantTexts(page), { timeout: 20_000 }).toEqual([STORY]);
    await page.close();
  });
});
