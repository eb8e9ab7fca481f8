/**
 * The Markdown a user reads: README.md and every docs/**\/*.md, paths relative to the repository
 * (forward slashes), the README first, then sorted. The site build, the snippet test
 * (test/readme) and the link check read this one list, so a guide added under docs/ is built and
 * checked without being listed anywhere.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

export interface MarkdownFile {
  /** Relative to the repository, with forward slashes (`docs/agent/core.md`). */
  path: string;
  text: string;
}

function markdownUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? markdownUnder(join(dir, entry.name)) : entry.name.endsWith('.md') ? [join(dir, entry.name)] : [],
  );
}

export function userMarkdown(repo: string): MarkdownFile[] {
  const files = [join(repo, 'README.md'), ...markdownUnder(join(repo, 'docs')).sort()];
  return files.map((file) => ({ path: relative(repo, file).split('\\').join('/'), text: readFileSync(file, 'utf8') }));
}
