/**
 * The site's style and its search script, written beside the pages. The search reads the index
 * from search-index.js (the JSON index as a script, so it works from file:// too) the first time
 * the box gets focus, and ranks sections by where the words occur (title, heading, text), a guide
 * above an export that only mentions them, an export named exactly above all.
 */

export const STYLE = `
:root { --fg: #1d2330; --muted: #5b6372; --line: #d9dde5; --panel: #f6f7f9; --accent: #2456c9; }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.55 system-ui, -apple-system, 'Segoe UI', sans-serif; color: var(--fg); }
header { display: flex; gap: 16px; align-items: center; padding: 10px 20px; border-bottom: 1px solid var(--line); position: sticky; top: 0; background: #fff; z-index: 2; }
header .name { font-weight: 700; color: var(--fg); text-decoration: none; }
header nav a { margin-right: 12px; color: var(--muted); text-decoration: none; }
.search { position: relative; margin-left: auto; }
.search input { width: 320px; max-width: 50vw; padding: 6px 10px; border: 1px solid var(--line); border-radius: 6px; font: inherit; }
.search ol { position: absolute; right: 0; top: 38px; width: 480px; max-width: 90vw; max-height: 70vh; overflow: auto; margin: 0; padding: 0; list-style: none; background: #fff; border: 1px solid var(--line); border-radius: 6px; box-shadow: 0 6px 20px rgba(0,0,0,.12); }
.search ol:empty { display: none; }
.search li a { display: block; padding: 8px 12px; color: var(--fg); text-decoration: none; border-bottom: 1px solid var(--line); }
.search li a:hover, .search li a:focus { background: var(--panel); }
.search li .where { color: var(--muted); font-size: 13px; }
.search li .snippet { color: var(--muted); font-size: 13px; display: block; }
.layout { display: grid; grid-template-columns: 250px minmax(0, 1fr); max-width: 1200px; margin: 0 auto; }
aside { padding: 16px 20px; border-right: 1px solid var(--line); font-size: 14px; }
aside h4 { margin: 14px 0 4px; font-size: 12px; text-transform: uppercase; color: var(--muted); }
aside ul { list-style: none; margin: 0; padding: 0; }
aside a { color: var(--fg); text-decoration: none; display: block; padding: 2px 0; }
aside a.current { color: var(--accent); font-weight: 600; }
main { padding: 8px 32px 60px; min-width: 0; }
main img { max-width: 100%; height: auto; }
pre { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 12px; overflow: auto; font-size: 13.5px; line-height: 1.45; }
code { font-family: ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace; font-size: .9em; }
table { border-collapse: collapse; display: block; overflow: auto; font-size: 14px; }
th, td { border: 1px solid var(--line); padding: 6px 10px; text-align: left; vertical-align: top; }
a { color: var(--accent); }
.kind { font-size: 12px; color: var(--muted); border: 1px solid var(--line); border-radius: 4px; padding: 0 5px; margin-left: 6px; }
.source { font-size: 13px; color: var(--muted); }
@media (max-width: 800px) { .layout { grid-template-columns: 1fr; } aside { display: none; } main { padding: 8px 16px; } }
`;

export const SEARCH_SCRIPT = `
(() => {
  const root = document.documentElement.dataset.root;
  const input = document.getElementById('search');
  const list = document.getElementById('search-results');
  let index = null;
  const load = () => new Promise((resolve) => {
    if (index) return resolve(index);
    const script = document.createElement('script');
    script.src = root + 'search-index.js';
    script.onload = () => resolve(index = window.LOOPCHART_SEARCH);
    document.head.append(script);
  });
  const words = (text) => text.toLowerCase().split(/[^\\p{L}\\p{N}_.-]+/u).filter((w) => w.length > 1);
  function rank(entries, query) {
    const terms = words(query);
    if (!terms.length) return [];
    const scored = [];
    for (const entry of entries) {
      const title = entry.title.toLowerCase(), section = (entry.section || '').toLowerCase(), text = entry.text.toLowerCase();
      let score = 0;
      for (const term of terms) {
        const s = (title.includes(term) ? 10 : 0) + (section.includes(term) ? 5 : 0) + (text.includes(term) ? 1 : 0);
        if (!s) { score = 0; break; }
        score += s;
      }
      // A guide's section before an export that merely mentions the words; an export asked for by its name first of all.
      if (entry.kind === 'api') score = title === query.toLowerCase() ? 1000 : score / 2;
      if (score) scored.push({ entry, score });
    }
    return scored.sort((a, b) => b.score - a.score).slice(0, 12).map(({ entry }) => entry);
  }
  function snippet(text, query) {
    const at = text.toLowerCase().indexOf(words(query)[0] || '');
    const from = Math.max(0, at - 40);
    return (from ? '…' : '') + text.slice(from, from + 140) + '…';
  }
  async function show() {
    const query = input.value.trim();
    const hits = query ? rank(await load(), query) : [];
    list.replaceChildren(...hits.map((entry) => {
      const li = document.createElement('li');
      const a = document.createElement('a');
      a.href = root + entry.url;
      const title = document.createElement('strong');
      title.textContent = entry.title;
      const where = document.createElement('span');
      where.className = 'where';
      where.textContent = entry.section ? ' — ' + entry.section : '';
      const text = document.createElement('span');
      text.className = 'snippet';
      text.textContent = snippet(entry.text, query);
      a.append(title, where, text);
      li.append(a);
      return li;
    }));
    if (query && !hits.length) {
      const li = document.createElement('li');
      li.textContent = 'Nothing found for ' + query;
      li.style.padding = '8px 12px';
      list.replaceChildren(li);
    }
  }
  input.addEventListener('focus', () => void load());
  input.addEventListener('input', () => void show());
  input.addEventListener('keydown', (event) => {
    if (event.key === 'Enter') list.querySelector('a')?.click();
    if (event.key === 'Escape') { input.value = ''; void show(); }
  });
})();
`;
