/**
 * Every relative link and image in README.md and docs/**\/*.md resolves: to a file or folder of
 * the repository and, with `#anchor`, to a heading of that page (GitHub's anchors, as the site
 * makes them). External URLs are not fetched: the suite reaches only 127.0.0.1.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isExternal, linksOf } from '../../scripts/docs-site/markdown.js';
import { REPO, userMarkdown, type MarkdownFile } from './markdown.js';

/** `page: target (why)` for each link of `pages` that does not resolve. */
function brokenLinks(pages: readonly MarkdownFile[], read: (path: string) => string | undefined): string[] {
  const broken: string[] = [];
  for (const page of pages) {
    for (const target of linksOf(page.text).targets) {
      if (isExternal(target)) continue;
      const [path = '', anchor] = target.split('#') as [string, string | undefined];
      if (!path) {
        if (!linksOf(page.text).anchors.includes(anchor ?? '')) broken.push(`${page.path}: ${target} (no heading with that anchor)`);
        continue;
      }
      const file = resolve(REPO, dirname(page.path), decodeURI(path));
      const inRepo = relative(REPO, file);
      if (inRepo.startsWith('..')) broken.push(`${page.path}: ${target} (outside the repository)`);
      else if (!existsSync(file)) broken.push(`${page.path}: ${target} (no such file)`);
      else if (anchor !== undefined) {
        const text = file.endsWith('.md') && statSync(file).isFile() ? read(file) : undefined;
        if (text === undefined) broken.push(`${page.path}: ${target} (an anchor into something that is not a Markdown page)`);
        else if (!linksOf(text).anchors.includes(anchor)) broken.push(`${page.path}: ${target} (no heading with that anchor)`);
      }
    }
  }
  return broken;
}

const readFile = (file: string) => readFileSync(file, 'utf8');

describe('links in the README and the docs', () => {
  const pages = userMarkdown();

  it('every relative link and image resolves to a file, and every anchor to a heading', () => {
    expect(pages.length).toBeGreaterThan(25);
    expect(brokenLinks(pages, readFile)).toEqual([]);
  });

  it('the table of contents (docs/README.md) links every page under docs/', () => {
    const contents = pages.find((page) => page.path === 'docs/README.md')!;
    const linked = new Set(linksOf(contents.text).targets.map((target) => `docs/${target.split('#')[0]}`));
    const unlisted = pages.filter((page) => page.path.startsWith('docs/') && page.path !== 'docs/README.md' && !linked.has(page.path));
    expect(unlisted.map((page) => page.path)).toEqual([]);
  });

  it('reports a missing file, a missing anchor, an anchor into a non-page and a link out of the repository', () => {
    const page = {
      path: 'docs/agent/example.md',
      text: '# Example\n\n## Two words\n\n[a](nope.md) [b](core.md#no-such-heading) [c](#two-words) [d](#gone) [e](../../package.json#x) [f](../../../etc/passwd) ![g](../images/none.svg)\n\n```md\n[not a link](in-code.md)\n```\n',
    };
    expect(brokenLinks([page], readFile)).toEqual([
      'docs/agent/example.md: nope.md (no such file)',
      'docs/agent/example.md: core.md#no-such-heading (no heading with that anchor)',
      'docs/agent/example.md: #gone (no heading with that anchor)',
      'docs/agent/example.md: ../../package.json#x (an anchor into something that is not a Markdown page)',
      'docs/agent/example.md: ../../../etc/passwd (outside the repository)',
      'docs/agent/example.md: ../images/none.svg (no such file)',
    ]);
  });
});
