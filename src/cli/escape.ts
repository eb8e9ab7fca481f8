/**
 * Text from a store (messages, ids, tool names, outcomes) reaches a terminal only through these:
 * control characters and escape sequences in it could move the cursor, rewrite lines already
 * printed, change the window title or hide text. They are shown as visible escapes instead.
 */

// C0 controls but tab and newline, DEL, C1 controls (0x9b is a one-byte CSI), the bidi
// overrides and isolates (they reorder what is shown), the line and paragraph separators U+2028
// and U+2029 (line breaks to some terminals and editors), the invisible U+200B (zero width
// space), U+2060 (word joiner) and U+FEFF (byte order mark), which make two different ids look
// the same, and lone surrogates.
const INVISIBLE = '\\u061c\\u200b\\u200e\\u200f\\u2028-\\u202e\\u2060\\u2066-\\u2069\\ufeff';
const LONE_SURROGATE = '[\\ud800-\\udbff](?![\\udc00-\\udfff])|(?<![\\ud800-\\udbff])[\\udc00-\\udfff]';
const UNSAFE = new RegExp(`[\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f${INVISIBLE}]|${LONE_SURROGATE}`, 'g');
const UNSAFE_LINE = new RegExp(`[\\u0000-\\u001f\\u007f-\\u009f${INVISIBLE}]|${LONE_SURROGATE}`, 'g');

const visible = (char: string): string => {
  const code = char.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
};

/** Multi-line text (a message): newlines and tabs stay, every other control becomes `\xNN` / `\uNNNN`. */
export function escapeText(text: string): string {
  return text.replace(UNSAFE, visible);
}

/** One-line text (an id, a name, an error message): newlines and tabs are escaped too. */
export function escapeLine(text: string): string {
  return text.replace(UNSAFE_LINE, visible);
}
