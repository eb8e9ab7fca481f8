import { InvalidConfigError } from '../errors.js';
import { isSensitiveName } from './redact.js';

/*
 * The credentials openAICompatibleModel sends (its apiKey, credential headers), checked when the
 * model is made. A blank one went out as `Authorization: Bearer` with nothing after it, and a
 * control character either made fetch refuse every call or was sent and refused by the server:
 * each call then failed with a 401 or "could not reach", never naming the option. No message
 * here quotes a value: it is a key.
 */

/** `U+000A at index 6` for the first match of `pattern` in `text` (counted from `offset`), or undefined: named, not quoted. */
export function controlCharacterAt(text: string, pattern: RegExp, offset = 0): string | undefined {
  const found = pattern.exec(text);
  if (!found) return undefined;
  return `U+${found[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')} at index ${found.index + offset}`;
}

/** \p{Cc}: C0 controls (a newline, a tab, NUL), DEL and C1 controls. */
export const CONTROL_CHARACTER = /\p{Cc}/u;
/** What fetch refuses inside a header value at every call (the Headers constructor lets them by): C0 but the tab, and DEL. */
const FETCH_REFUSED = /[\u0000-\u0008\u000a-\u001f\u007f]/;
/** The ends fetch trims from a header value before sending it. */
const HTTP_WHITESPACE_ENDS = /^[\t\n\r ]+|[\t\n\r ]+$/g;
/** An authorization scheme alone (`Bearer`, `Basic `): the credential after it is missing. */
const BARE_SCHEME = /^(?:bearer|basic|token|digest|apikey)$/i;

const problem = (what: string) => new InvalidConfigError(`openAICompatibleModel: ${what}`);

/**
 * The key to send, or undefined for none. `''` (and no apiKey) sends none, as a local server such
 * as Ollama needs. Whitespace around a key is dropped (a key file read whole ends in a newline,
 * which fetch trimmed, but a space before it went after `Bearer`); one that is only whitespace,
 * or holds a control character, is refused.
 */
export function apiKeyOption(apiKey: string | undefined): string | undefined {
  if (apiKey === undefined || apiKey === '') return undefined;
  const key = apiKey.trim();
  if (key === '') throw problem("apiKey is only whitespace, which would send \"Authorization: Bearer\" with no key; leave it out (or pass '') for a server that needs none");
  const control = controlCharacterAt(key, CONTROL_CHARACTER, apiKey.length - apiKey.trimStart().length);
  if (control) throw problem(`apiKey must not contain control characters (a newline, a tab), got ${control}`);
  return key;
}

/**
 * Each header value as fetch would send it: none holding a character fetch refuses at every call.
 * A header named like a credential (`authorization`, `x-api-key`) holds one: not only whitespace
 * (`''` is sent empty, as before), not a scheme alone (`Bearer `), no control character.
 */
export function checkHeaderValues(headers: Readonly<Record<string, string>>): void {
  for (const [name, value] of Object.entries(headers)) {
    const sent = value.replace(HTTP_WHITESPACE_ENDS, '');
    const offset = value.length - value.replace(/^[\t\n\r ]+/, '').length;
    const credential = isSensitiveName(name);
    const control = controlCharacterAt(sent, credential ? CONTROL_CHARACTER : FETCH_REFUSED, offset);
    if (control) throw problem(`headers.${name} must not contain control characters (a newline, a tab), got ${control}`);
    if (!credential) continue;
    if (value !== '' && sent === '') throw problem(`headers.${name} is only whitespace: it would be sent empty; leave the header out for a server that needs no key`);
    if (BARE_SCHEME.test(sent)) throw problem(`headers.${name} holds the scheme ${JSON.stringify(sent)} and no credential after it`);
  }
}
