/**
 * The docs site in Debian's chromium: `buildSite` (what `npm run docs:build` runs) writes it to a
 * temporary folder, a static server serves it on 127.0.0.1, and the browser checks that the home
 * page renders with both chart pictures, that the search box finds a guide by its words and an
 * API export by its name, and that a result opens the page at its section.
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { extname, join, normalize } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSite } from '../../scripts/docs-site/build.js';
import { hasChromium, launchChromium } from '../browser/support/chromium.js';

const TYPES = new Map([
  ['.html', 'text/html; charset=utf-8'],
  ['.js', 'text/javascript'],
  ['.json', 'application/json'],
  ['.css', 'text/css'],
  ['.svg', 'image/svg+xml'],
]);

/** Serves `root` read-only; anything outside it or missing is a 404. */
function serve(root: string): Promise<{ server: Server; url: string }> {
  const server = createServer((request, response) => {
    const path = normalize(decodeURIComponent(new URL(request.url ?? '/', 'http://127.0.0.1').pathname));
    const file = join(root, path.endsWith('/') ? `${path}index.html` : path);
    try {
      if (!file.startsWith(root) || !statSync(file).isFile()) throw new Error('not a file');
      response.writeHead(200, { 'content-type': TYPES.get(extname(file)) ?? 'text/plain; charset=utf-8' }).end(readFileSync(file));
    } catch {
      response.writeHead(404).end();
    }
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}/` })));
}

describe.skipIf(!hasChromium)('the docs site', () => {
  const dir = mkdtempSync(join(tmpdir(), 'loopchart-docs-site-'));
  const site = join(dir, 'site');
  let served: { server: Server; url: string };
  let browser: BrowserContext;
  let page: Page;
  const errors: string[] = [];

  beforeAll(async () => {
    const built = buildSite(site);
    expect(built.pages).toBeGreaterThan(30);
    served = await serve(site);
    browser = await launchChromium(join(dir, 'profile'), { viewport: { width: 1280, height: 900 } });
    page = await browser.newPage();
    page.on('pageerror', (error) => errors.push(error.message));
    page.on('console', (message) => void (message.type() === 'error' && errors.push(message.text())));
  });

  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => (served ? served.server.close(resolve) : resolve(undefined)));
    rmSync(dir, { recursive: true, force: true });
  });

  it('renders the home page: the title, the Quickstart, both chart pictures loaded, no page error', async () => {
    await page.goto(served.url);
    expect(await page.locator('main h1').first().textContent()).toBe('loopchart');
    expect(await page.locator('#quickstart').isVisible()).toBe(true);
    const charts = page.locator('main img[src$="-chart.svg"]');
    expect(await charts.count()).toBe(2);
    for (const chart of await charts.all()) {
      await chart.scrollIntoViewIfNeeded();
      await expect.poll(() => chart.evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth > 0), { timeout: 10_000 }).toBe(true);
    }
    expect(errors).toEqual([]);
  });

  it('finds a guide by the words in it, and the result opens the guide', async () => {
    await page.goto(`${served.url}docs/index.html`);
    await page.locator('#search').fill('output guardrail feedback');
    const first = page.locator('#search-results a').first();
    await first.waitFor({ timeout: 10_000 });
    expect(await first.textContent()).toContain('Guardrails');
    await first.click();
    await page.waitForURL(/\/docs\/agent\/guardrails\.html/);
    expect(await page.locator('main h1').textContent()).toBe('Guardrails');
    expect(errors).toEqual([]);
  });

  it('finds an API export by its name, and says so when nothing matches', async () => {
    await page.goto(`${served.url}docs/agent/core.html`);
    await page.locator('#search').fill('createChatHandler');
    const hit = page.locator('#search-results a[href$="api/loopchart-http.html#createChatHandler"]');
    await hit.waitFor({ timeout: 10_000 });
    await hit.click();
    await page.waitForURL(/api\/loopchart-http\.html#createChatHandler$/);
    expect(await page.locator('h2#createChatHandler').isVisible()).toBe(true);
    await page.locator('#search').fill('zzqqxx nothing like this');
    await expect.poll(() => page.locator('#search-results').textContent(), { timeout: 10_000 }).toContain('Nothing found');
    expect(errors).toEqual([]);
  });

  it('links between guides point at their pages: none of the built pages links to a .md file', () => {
    const html = readFileSync(join(site, 'docs', 'index.html'), 'utf8');
    expect(html).toContain('href="agent/guardrails.html"');
    expect(html).not.toMatch(/href="[^"#]+\.md(#[^"]*)?"/);
  });
});
