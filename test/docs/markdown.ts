/** The repository's root and the Markdown a user reads (scripts/docs-site/pages.ts), for the docs tests. */
import { fileURLToPath } from 'node:url';
import { userMarkdown as pagesOf, type MarkdownFile } from '../../scripts/docs-site/pages.js';

export type { MarkdownFile };
export const REPO = fileURLToPath(new URL('../../', import.meta.url));
export const userMarkdown = (): MarkdownFile[] => pagesOf(REPO);
