/**
 * What a search query becomes before any backend sees it: plain words. A query comes from a model
 * or a user and may hold anything (FTS5 or tsquery operators, quotes, control characters, a
 * megabyte of text); only runs of letters and digits survive, lower-cased, so no backend ever
 * parses query syntax someone else wrote. Words are OR-ed by the backends and ranked.
 */

/** Longest query read (characters); the rest is ignored. */
export const MAX_QUERY_CHARS = 2_000;
/** Most words one search looks for. */
export const MAX_TERMS = 16;
const MAX_TERM_CHARS = 64;

/** Words that match nearly everything: they would rank every entry alike. */
const STOP_WORDS = new Set(
  'a an and are as at be but by do does for from had has have i if in is it its me my no not of on or our so than that the their them then there these they this to was we were what when where which who why will with you your'.split(' '),
);

/**
 * The words of a query a backend searches for: at most `MAX_TERMS` distinct letter-and-digit runs,
 * lower-cased (NFKC), stop words dropped unless nothing else is left. Empty when the query has no
 * word at all (then a search finds nothing).
 */
export function searchTerms(query: string): string[] {
  const words = query.slice(0, MAX_QUERY_CHARS).normalize('NFKC').toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
  const distinct = [...new Set(words.map((word) => word.slice(0, MAX_TERM_CHARS)))];
  const meaningful = distinct.filter((word) => !STOP_WORDS.has(word));
  return (meaningful.length > 0 ? meaningful : distinct).slice(0, MAX_TERMS);
}

/** The words of an indexed text, for a backend that ranks in process (the memory backend). */
export const wordsOf = (text: string): string[] => text.normalize('NFKC').toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];

/**
 * Whether a term is a plain word, as `searchTerms` makes them. The SQL backends build their
 * engine's query text (FTS5 MATCH, tsquery) from the terms and search for nothing else: a term
 * that reached them another way cannot add an operator.
 */
export const isPlainTerm = (term: string): boolean => /^[\p{L}\p{N}]+$/u.test(term);
