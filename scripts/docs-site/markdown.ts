/**
 * What the docs site and the link check agree on about a Markdown page: the anchor a heading gets
 * (GitHub's rule, so `guide.md#tool-policy` works on a forge and on the site alike) and the links
 * a page makes (code blocks excluded: marked's lexer reads the page as a renderer would).
 */
import { Marked, type Token, type Tokens } from 'marked';

const lexer = new Marked();

/** The plain text of a heading's Markdown: code spans, emphasis and link targets left out. */
const plain = (markdown: string): string =>
  markdown
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/[`*]/g, '')
    .replace(/<[^>]+>/g, '');

/** GitHub's anchor of a heading text: lower case, punctuation dropped, spaces as hyphens. */
export const slugOf = (heading: string): string =>
  plain(heading)
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');

/** Hands out anchors for a page's headings in order: a repeated one gets `-1`, `-2`, … as on GitHub. */
export class Slugger {
  readonly #seen = new Map<string, number>();
  slug(heading: string): string {
    const base = slugOf(heading);
    const count = this.#seen.get(base);
    this.#seen.set(base, (count ?? -1) + 1);
    return count === undefined ? base : `${base}-${count + 1}`;
  }
}

export interface PageLinks {
  /** Every heading's anchor, in order. */
  anchors: string[];
  /** Every link and image target, as written. */
  targets: string[];
}

export function tokensOf(markdown: string): Token[] {
  return lexer.lexer(markdown);
}

/** The anchors a page defines and the targets it links to. */
export function linksOf(markdown: string): PageLinks {
  const slugger = new Slugger();
  const anchors: string[] = [];
  const targets: string[] = [];
  lexer.walkTokens(tokensOf(markdown), (token) => {
    if (token.type === 'heading') anchors.push(slugger.slug((token as Tokens.Heading).text));
    if (token.type === 'link' || token.type === 'image') targets.push((token as Tokens.Link | Tokens.Image).href);
  });
  return { anchors, targets };
}

/** A target that leaves the repository (a URL with a scheme, or protocol-relative). */
export const isExternal = (target: string): boolean => /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//');
