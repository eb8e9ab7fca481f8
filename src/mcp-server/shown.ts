/**
 * What a protocol error repeats of what the client sent (a tool name, argument keys in a schema's
 * complaint) reaches the client's logs and screens: it is cut short and its control characters
 * (DEL and C1, which JSON leaves as they are, the bidi overrides, the line separators) are written
 * as `\uNNNN`, so a name cannot move a terminal's cursor or swell an error to the body limit.
 */

const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b\u200e\u200f\u2028-\u202e\u2060\u2066-\u2069\ufeff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

const escaped = (char: string): string => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`;

const cut = (text: string, max: number): string => (text.length > max ? `${text.slice(0, max)}… (${text.length} characters)` : text);

/** `text` in single quotes (as the other messages name things), at most `max` of its characters, every control escaped as JSON does. */
export function quoted(text: string, max: number): string {
  const shown = `'${JSON.stringify(text.slice(0, max)).slice(1, -1).replace(UNSAFE, escaped)}'`;
  return text.length > max ? `${shown}… (${text.length} characters)` : shown;
}

/** Multi-line text (a schema's complaint) of at most `max` characters: newlines and tabs stay, every other control is escaped. */
export function visibleText(text: string, max: number): string {
  return cut(text.replace(UNSAFE, escaped), max);
}
