/**
 * The Markdown a user reads: README.md and every docs/**\/*.md, as { path, text }, paths relative
 * to the repository and sorted. Shared by the snippet test (test/readme), the link check and the
 * site build's test, so a guide added under docs/ is checked without being listed anywhere.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = fileURLToPath(new URL('../../', import.meta.url));

function markdownUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? markdownUnder(join(dir, entry.name)) : entry.name.endsWith('.md') ? [join(dir, entry.name)] : [],
  );
}

export interface MarkdownFile {
  /** Relative to the repository, with forward slashes (`docs/agent/core.md`). */
  path: string;
  text: string;
}

export function userMarkdown(): MarkdownFile[] {
  const files = [join(REPO, 'README.md'), ...markdownUnder(join(REPO, 'docs')).sort()];
  return files.map((file) => ({ path: relative(REPO, file).split('\\').join('/'), text: readFileSync(file, 'utf8') }));
}
