/**
 * Long text kept out of a page's data. A page's JSON is parsed whole before anything shows, so a
 * 23 MB reply (stored three times over: the reply, the next prompt, the log) would cost seconds
 * on every load. Strings past `LAZY_TEXT_OVER` characters are moved into a side table (one
 * entry per distinct text, written as its own island after the page script) and replaced by a
 * marker: the text's length, its table index and its first characters. The page shows the
 * head, and parses the whole text only when asked to. Pure and DOM-free: the server and the
 * page script both use it.
 */

/** Text longer than this is lazy (the page shows its head with a button for the rest). */
export const LAZY_TEXT_OVER = 20_000;
/** Characters of a lazy text the page shows before it is expanded. */
export const LAZY_HEAD = 2_000;

/**
 * Starts every marker. NUL never starts a real message in practice, and a stored string that
 * does start with the prefix is made lazy whatever its length, so no stored text can pass for a
 * marker.
 */
const PREFIX = '\u0000lazy:';

/** The element id of lazy text number `index`'s island: a JSON string, parsed when expanded. */
export const lazyTextId = (index: number): string => `loopchart-text-${index}`;

/** What a marker stands for: the whole text's length, its index in the side table, its head. */
export interface LazyText {
  length: number;
  index: number;
  head: string;
}

/** The marker of a lazy text (a plain string, so the data keeps its shape). */
export const lazyMarker = ({ length, index, head }: LazyText): string => `${PREFIX}${length}:${index}:${head}`;

/** The lazy text a string marks, or null for ordinary text. */
export function parseLazy(text: string): LazyText | null {
  if (!text.startsWith(PREFIX)) return null;
  const match = /^(\d{1,15}):(\d{1,9}):/.exec(text.slice(PREFIX.length, PREFIX.length + 27));
  if (!match) return null;
  return { length: Number(match[1]), index: Number(match[2]), head: text.slice(PREFIX.length + match[0].length) };
}

/** What a string shows before it is expanded: its head when it is a marker, else itself. */
export const shownText = (text: string): string => parseLazy(text)?.head ?? text;

/**
 * The long texts of one page (or of one session's cached trace): `lift` replaces every long
 * string (and every string that looks like a marker) by a marker and keeps the text, once per
 * distinct text, in `texts`.
 */
export class LazyTexts {
  readonly texts: string[] = [];
  readonly #indexOf = new Map<string, number>();
  readonly #over: number;

  constructor(over = LAZY_TEXT_OVER) {
    this.#over = over;
  }

  /** `value` with its long strings as markers. A copy where something was replaced: `value` is not changed (it may be shared). */
  lift<T>(value: T): T {
    return this.#walk(value) as T;
  }

  #text(text: string): string {
    if (text.length <= this.#over && !text.startsWith(PREFIX)) return text;
    let index = this.#indexOf.get(text);
    if (index === undefined) {
      index = this.texts.push(text) - 1;
      this.#indexOf.set(text, index);
    }
    return lazyMarker({ length: text.length, index, head: text.slice(0, LAZY_HEAD) });
  }

  #walk(node: unknown): unknown {
    if (typeof node === 'string') return this.#text(node);
    if (node === null || typeof node !== 'object') return node;
    if (Array.isArray(node)) {
      let copy: unknown[] | undefined;
      for (let i = 0; i < node.length; i++) {
        const next = this.#walk(node[i]);
        if (next !== node[i]) (copy ??= node.slice())[i] = next;
      }
      return copy ?? node;
    }
    let copy: Record<string, unknown> | undefined;
    for (const key of Object.keys(node)) {
      const before = (node as Record<string, unknown>)[key];
      const next = this.#walk(before);
      if (next !== before) (copy ??= { ...(node as Record<string, unknown>) })[key] = next;
    }
    return copy ?? node;
  }
}
