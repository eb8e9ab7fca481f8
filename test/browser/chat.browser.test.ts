/**
 * The chat UI in a real browser: the example page of `npm run example:chat` (examples/chat-ui: a
 * React page on `useChat`, @ai-sdk/react 3, AI SDK 6, built with Vite), served with
 * createChatHandler by the example's own server in a child process over a SQLite file kept with
 * `--data`, its offline scripted model streaming with delays. Streamed text and tool parts; an
 * approval in the page that runs the tool once; Stop; a reload mid-stream; a second tab; the
 * server SIGKILLed mid-run and restarted, the page finishing the turn. Each time the reply is
 * there exactly once.
 *
 * Skipped when /usr/bin/chromium is absent (LOOPCHART_REQUIRE_CHROMIUM=1 makes that a failure).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, type Page } from 'playwright-core';
import { hasChromium, launchChromium } from './support/chromium.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORY } from '../../examples/chat-ui/agent.js';
import { startChatExample, stopChatExample, type ChatExample } from '../support/chat-example.js';


const root = mkdtempSync(join(tmpdir(), 'loopchart-chat-'));

let context: BrowserContext;
let server: ChatExample | undefined;
let port = 0;
const transfers: string[] = [];

/** Starts the example's server (on `port` once it has one) over the kept data folder. */
async function startServer(): Promise<void> {
  server = await startChatExample({ data: join(root, 'data'), port, onLine: (line) => void (line.startsWith('transfer ') && transfers.push(line)) });
  port = server.port;
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
const ready = (page: Page) => expect.poll(() => page.locator('#status').textContent(), { timeout: 30_000 }).toBe('ready');

/** Waits until the last answer shows part of the story, not all of it: mid-stream. */
async function midStory(page: Page): Promise<string> {
  await page.waitForFunction(
    (story) => {
      const texts = [...document.querySelectorAll('.message[data-role=assistant]')].map((n) => [...n.querySelectorAll('.text')].map((t) => t.textContent).join('|'));
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
    await startServer();
    context = await launchChromium(join(root, 'profile'));
  }, 120_000);

  afterAll(async () => {
    await context?.close();
    await stopChatExample(server);
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
    await expect.poll(() => lastAnswer(page), { timeout: 20_000 }).toBe('I will ask you first.|Done: see the tool result above.');
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

  it('Stop mid-stream: the page stops and the run ends on the server, the text that arrived kept', async () => {
    const page = await open('stop');
    await ask(page, 'Tell me a story.');
    const partial = await midStory(page);
    await page.click('#stop');
    await ready(page);
    const shown = await lastAnswer(page);
    expect(STORY.startsWith(shown) && shown.length >= partial.length && shown.length < STORY.length).toBe(true);
    // The run was cancelled, not only this page's stream: a reload after the story's time shows no more.
    await page.waitForTimeout(5500);
    await page.reload();
    await page.locator('#prompt').waitFor();
    const stored = await lastAnswer(page);
    expect(stored.length).toBeLessThan(STORY.length);
    expect(STORY.startsWith(stored)).toBe(true);
    await page.close();
  });

  it('the server SIGKILLed mid-run and restarted: the page finishes the turn, no text twice', async () => {
    const page = await open('killed');
    await ask(page, 'Tell me another story.');
    await midStory(page);
    server!.child.kill();
    await server!.child.done;
    await startServer();
    await expect.poll(() => assistantTexts(page), { timeout: 40_000 }).toEqual([STORY]);
    await ready(page);
    // And after a reload, from the store.
    await page.reload();
    await expect.poll(() => assistantTexts(page), { timeout: 20_000 }).toEqual([STORY]);
    await page.close();
  });
});
