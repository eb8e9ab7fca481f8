/**
 * `npm run docs:build [-- --out <dir>]`: the documentation site, static HTML in docs-site/ (or
 * <dir>): README.md as the home page, every docs/**\/*.md as a page (links between guides point
 * at their pages, anchors as on GitHub), an API reference per public entry read from the TSDoc
 * (./api.ts), a search index of every section and export with a small search box, and the files
 * the guides link to (pictures, examples) copied beside them. Works served or opened from disk.
 *
 * Why this and not a site generator: marked (no dependencies of its own) and the TypeScript
 * compiler the project already has do the whole job in seconds, with one search over guides and
 * API alike. VitePress would bring a Vite of its own beside the pinned one; TypeDoc five
 * dependencies, a second theme and a second search, and a full type-check of the program.
 */
import { copyFileSync, existsSync, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, posix, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Marked, type Token, type Tokens } from 'marked';
import { readApi, type ApiEntry } from './api.js';
import { SEARCH_SCRIPT, STYLE } from './assets.js';
import { isExternal, linksOf, Slugger, tokensOf } from './markdown.js';
import { userMarkdown, type MarkdownFile } from './pages.js';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

/** One entry of the search index: a section of a page, or an export of the API. */
export interface SearchEntry {
  /** A section of a guide, or an export of the API reference. */
  kind: 'guide' | 'api';
  title: string;
  section: string;
  /** Relative to the site's root, with the anchor. */
  url: string;
  text: string;
}

interface Built {
  url: string;
  title: string;
  body: string;
}

/** Where a Markdown file's page goes: README.md is the home page, a folder's README its index. */
export const pageUrl = (path: string): string => (path === 'README.md' ? 'index.html' : path.replace(/(^|\/)README\.md$/, '$1index.html').replace(/\.md$/, '.html'));

const escapeHtml = (text: string): string => text.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);

/** Plain text of Markdown for the index: code fences, markup and link targets left out. */
const plainText = (markdown: string): string =>
  markdown
    .replace(/```\w*\n?/g, '')
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/[`*]/g, '')
    .replace(/[|#>]/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();

/** Rewrites a page's link: a guide to its page, another file of the repository to its copy. */
function linkRewriter(page: string, copies: Set<string>) {
  const from = posix.dirname(pageUrl(page));
  return (href: string): string => {
    if (isExternal(href) || href.startsWith('#')) return href;
    const [path = '', anchor] = href.split('#') as [string, string | undefined];
    const target = posix.normalize(posix.join(posix.dirname(page), decodeURI(path)));
    let url = target;
    if (target.endsWith('.md')) url = pageUrl(target);
    else if (existsSync(join(REPO, target)) && statSync(join(REPO, target)).isFile()) copies.add(target);
    // A folder of the repository (a feature's code) has no page on the site: the link becomes its text.
    else return FOLDER;
    return encodeURI(posix.relative(from, url) || posix.basename(url)) + (anchor === undefined ? '' : `#${anchor}`);
  };
}

/** The href of a link to a folder of the repository, rendered as its text alone. */
const FOLDER = 'loopchart-folder:';

function markedFor(rewrite: (href: string) => string): Marked {
  const slugger = new Slugger();
  return new Marked({
    walkTokens: (token) => {
      if (token.type === 'link' || token.type === 'image') (token as Tokens.Link).href = rewrite((token as Tokens.Link).href);
    },
    renderer: {
      link({ href, tokens }) {
        return href === FOLDER ? this.parser.parseInline(tokens) : false;
      },
      heading({ tokens, depth, text }) {
        const id = slugger.slug(text);
        return `<h${depth} id="${escapeHtml(id)}">${this.parser.parseInline(tokens)}</h${depth}>\n`;
      },
    },
  });
}

/** A page's sections for the index: its title, then each heading with the text under it. */
function sectionsOf(page: MarkdownFile, title: string): SearchEntry[] {
  const url = pageUrl(page.path);
  const slugger = new Slugger();
  const sections: SearchEntry[] = [{ kind: 'guide', title, section: '', url, text: '' }];
  for (const token of tokensOf(page.text) as Token[]) {
    if (token.type === 'heading') {
      const heading = token as Tokens.Heading;
      const anchor = slugger.slug(heading.text);
      if (heading.depth > 1) sections.push({ kind: 'guide', title, section: plainText(heading.text), url: `${url}#${anchor}`, text: '' });
    } else sections.at(-1)!.text += ` ${plainText(token.raw)}`;
  }
  return sections.map((s) => ({ ...s, text: s.text.trim().slice(0, 3000) })).filter((s) => s.section || s.text);
}

const titleOf = (page: MarkdownFile): string => {
  const heading = tokensOf(page.text).find((t): t is Tokens.Heading => t.type === 'heading' && t.depth === 1);
  return heading ? plainText(heading.text) : page.path;
};

interface NavGroup {
  name: string;
  links: Array<{ url: string; title: string }>;
}

/** The sidebar: pages grouped by folder, in the order the contents page (docs/README.md) lists them. */
function navigation(pages: readonly MarkdownFile[], titles: ReadonlyMap<string, string>, api: readonly ApiEntry[]): NavGroup[] {
  const contents = pages.find((p) => p.path === 'docs/README.md');
  const order = contents ? linksOf(contents.text).targets.map((t) => posix.normalize(posix.join('docs', t.split('#')[0]!))) : [];
  const rank = (path: string) => (order.includes(path) ? order.indexOf(path) : order.length);
  const group = (path: string): string =>
    path === 'README.md' || path === 'docs/README.md'
      ? 'Start'
      : path.startsWith('docs/agent/')
        ? 'Features'
        : path.startsWith('docs/integrations/')
          ? 'Integrations'
          : /^docs\/(sessions|viewer|cli|mcp-server|schedules|http\/)/.test(path)
            ? 'Sessions and hosts'
            : /^docs\/(guarantees|errors|contributing)\.md$/.test(path)
              ? 'Reference'
              : /^docs\/(install|concepts|which-way|examples|quickstart)\.md$/.test(path)
                ? 'Start'
                : 'More';
  const groups = new Map<string, NavGroup>(['Start', 'Features', 'Sessions and hosts', 'Integrations', 'More', 'Reference'].map((name) => [name, { name, links: [] }]));
  const sorted = [...pages].sort((a, b) => (a.path === 'README.md' ? -1 : b.path === 'README.md' ? 1 : rank(a.path) - rank(b.path)));
  for (const page of sorted) groups.get(group(page.path))!.links.push({ url: pageUrl(page.path), title: page.path === 'README.md' ? 'Home' : page.path === 'docs/README.md' ? 'Contents' : titles.get(page.path)! });
  groups.get('Reference')!.links.push({ url: 'api/index.html', title: 'API reference' }, ...api.map((entry) => ({ url: apiUrl(entry), title: `  ${entry.specifier}` })));
  return [...groups.values()];
}

const apiUrl = (entry: ApiEntry): string => `api/${entry.specifier.replace(/\//g, '-')}.html`;

function layout(url: string, title: string, body: string, nav: readonly NavGroup[]): string {
  const root = posix.relative(posix.dirname(url), '.') || '.';
  const href = (target: string) => posix.relative(posix.dirname(url), target) || posix.basename(target);
  const side = nav
    .map((group) => `<h4>${escapeHtml(group.name)}</h4><ul>${group.links.map((link) => `<li><a href="${escapeHtml(href(link.url))}"${link.url === url ? ' class="current" aria-current="page"' : ''}>${escapeHtml(link.title)}</a></li>`).join('')}</ul>`)
    .join('\n');
  return `<!doctype html>
<html lang="en" data-root="${escapeHtml(root === '.' ? '' : `${root}/`)}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>${escapeHtml(title)} · loopchart</title>
<link rel="stylesheet" href="${escapeHtml(href('style.css'))}">
</head>
<body>
<header>
<a class="name" href="${escapeHtml(href('index.html'))}">loopchart</a>
<nav><a href="${escapeHtml(href('docs/index.html'))}">Guides</a><a href="${escapeHtml(href('api/index.html'))}">API</a></nav>
<div class="search" role="search"><input id="search" type="search" placeholder="Search the docs" aria-label="Search the docs" autocomplete="off"><ol id="search-results" aria-label="Search results"></ol></div>
</header>
<div class="layout">
<aside><nav aria-label="Pages">${side}</nav></aside>
<main>
${body}
</main>
</div>
<script src="${escapeHtml(href('search.js'))}"></script>
</body>
</html>
`;
}

function apiPage(entry: ApiEntry, marked: Marked): string {
  const items = entry.exports.map((item) => {
    const doc = item.doc.replace(/\{@link\s+([^}|\s]+)[^}]*\}/g, '`$1`');
    return `<section><h2 id="${escapeHtml(item.name)}">${escapeHtml(item.name)}<span class="kind">${item.kind}</span></h2>
<p class="source">${escapeHtml(item.source)}</p>
<pre><code class="language-ts">${escapeHtml(item.signature)}</code></pre>
${doc ? marked.parse(doc, { async: false }) : ''}</section>`;
  });
  const list = entry.exports.map((item) => `<a href="#${escapeHtml(item.name)}"><code>${escapeHtml(item.name)}</code></a>`).join(', ');
  return `<h1><code>${escapeHtml(entry.specifier)}</code></h1>\n<p>${entry.exports.length} exports: ${list}</p>\n${items.join('\n')}`;
}

/** Builds the site into `out` (emptied first); returns what it wrote. */
export function buildSite(out: string): { pages: number; apiExports: number; searchEntries: number } {
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const pages = userMarkdown(REPO);
  const titles = new Map(pages.map((page) => [page.path, titleOf(page)]));
  const api = readApi(REPO);
  const nav = navigation(pages, titles, api);
  const copies = new Set<string>();
  const search: SearchEntry[] = [];
  const built: Built[] = [];
  for (const page of pages) {
    const body = markedFor(linkRewriter(page.path, copies)).parse(page.text, { async: false });
    built.push({ url: pageUrl(page.path), title: titles.get(page.path)!, body });
    search.push(...sectionsOf(page, titles.get(page.path)!));
  }
  const apiMarked = new Marked();
  built.push({
    url: 'api/index.html',
    title: 'API reference',
    body: `<h1>API reference</h1>\n<p>Every export of every public entry point, with its declaration and its TSDoc, read from the sources.</p>\n<ul>${api.map((entry) => `<li><a href="${escapeHtml(posix.basename(apiUrl(entry)))}"><code>${escapeHtml(entry.specifier)}</code></a>: ${entry.exports.length} exports</li>`).join('')}</ul>`,
  });
  for (const entry of api) {
    built.push({ url: apiUrl(entry), title: entry.specifier, body: apiPage(entry, apiMarked) });
    for (const item of entry.exports) search.push({ kind: 'api', title: item.name, section: `${entry.specifier} · ${item.kind}`, url: `${apiUrl(entry)}#${item.name}`, text: plainText(item.doc).slice(0, 600) });
  }
  for (const page of built) {
    mkdirSync(dirname(join(out, page.url)), { recursive: true });
    writeFileSync(join(out, page.url), layout(page.url, page.title, page.body, nav));
  }
  for (const file of copies) {
    mkdirSync(dirname(join(out, file)), { recursive: true });
    copyFileSync(join(REPO, file), join(out, file));
  }
  const index = JSON.stringify(search);
  writeFileSync(join(out, 'search-index.json'), index);
  // The same index as a script: a page opened from disk cannot fetch a file beside it.
  writeFileSync(join(out, 'search-index.js'), `window.LOOPCHART_SEARCH = ${index.replace(/</g, '\\u003c')};\n`);
  writeFileSync(join(out, 'search.js'), SEARCH_SCRIPT);
  writeFileSync(join(out, 'style.css'), STYLE);
  return { pages: built.length, apiExports: api.reduce((n, entry) => n + entry.exports.length, 0), searchEntries: search.length };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf('--out');
  const out = resolve(at === -1 ? join(REPO, 'docs-site') : process.argv[at + 1]!);
  const started = performance.now();
  const { pages, apiExports, searchEntries } = buildSite(out);
  console.log(`${out}: ${pages} pages (${apiExports} API exports), ${searchEntries} search entries, ${((performance.now() - started) / 1000).toFixed(1)} s`);
}
