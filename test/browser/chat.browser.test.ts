/**
 * The chat UI in a real browser: the example page of `npm run example:chat` (examples/chat-ui: a
 * React page on `useChat`, @ai-sdk/react 3, AI SDK 6, built with Vite), served with
 * createChatHandler by the example's own server in a child process over a SQLite file kept with
 * `--data`, its offline scripted model streaming with delays. Streamed text and tool cards; an
 * approval in the page that runs the tool once; a subagent's approval, under the card of the
 * call that runs it; Stop (the page then shows what a reload shows); a reload mid-stream; a
 * second tab; the server SIGKILLed mid-run and restarted, the page finishing the turn. Each time
 * the reply is there exactly once.
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
    expect(await tool.locator('.tool-input').textContent()).toBe(JSON.stringify({ expression: '6*7' }, null, 2));
    expect(await tool.locator('.tool-output').textContent()).toBe('42');
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

  it('Stop mid-stream: the run ends on the server; the stopped reply is not kept, on the page as after a reload', async () => {
    const page = await open('stop');
    await ask(page, 'Tell me a story.');
    await midStory(page);
    await page.click('#stop');
    await ready(page);
    // The session stores none of a stopped reply: the page shows the stored chat, the question without its partial answer.
    await expect.poll(() => assistantTexts(page), { timeout: 10_000 }).toEqual([]);
    const shown = await page.locator('.message').evaluateAll((nodes) => nodes.map((node) => [node.getAttribute('data-role'), node.querySelector('.text')?.textContent]));
    expect(shown).toEqual([['user', 'Tell me a story.']]);
    // The run was cancelled, not only this page's stream: a reload after the story's time shows the same.
    await page.waitForTimeout(5500);
    await page.reload();
    await page.locator('#prompt').waitFor();
    await expect.poll(() => page.locator('.message').evaluateAll((nodes) => nodes.map((node) => [node.getAttribute('data-role'), node.querySelector('.text')?.textContent])), { timeout: 10_000 }).toEqual(shown);
    // And the chat goes on.
    await ask(page, 'What is 6 times 7?');
    await expect.poll(() => lastAnswer(page), { timeout: 20_000 }).toBe('Let me calculate that.|Six times seven is 42.');
    await page.close();
  });

  it("a subagent's approval, under the card of the call that runs it: approving runs the child's tool once and the run completes", async () => {
    const page = await open('subagent');
    await ask(page, 'Ask the assistant to send 7 to Bob.');
    const call = page.locator('.tool[data-tool=assistant]');
    const nested = call.locator('.children .tool[data-tool=transfer]');
    await expect.poll(() => nested.getAttribute('data-state'), { timeout: 20_000 }).toBe('approval-requested');
    // The child's words so far, under its call; the response ended as for the page's own approvals.
    expect(await call.locator('.progress-text').textContent()).toBe('I will ask you first.');
    await ready(page);
    expect(transfers.filter((line) => line === 'transfer 7')).toEqual([]);
    await nested.locator('.approve').click();
    await expect.poll(() => nested.getAttribute('data-state'), { timeout: 20_000 }).toBe('output-available');
    expect(await nested.locator('.tool-output').textContent()).toBe('sent 7');
    await expect.poll(() => lastAnswer(page), { timeout: 20_000 }).toBe('I will hand that to the assistant.|The assistant has finished.');
    await expect.poll(() => call.getAttribute('data-state'), { timeout: 20_000 }).toBe('output-available');
    expect(await call.locator(':scope > .tool-output').textContent()).toBe('Done: see the tool result above.');
    await ready(page);
    expect(await page.locator('#error').count()).toBe(0);
    expect(transfers.filter((line) => line === 'transfer 7')).toEqual(['transfer 7']);
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
