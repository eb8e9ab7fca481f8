import { isAbortError } from './errors.js';

/**
 * Credentials out of what a model adapter throws. A provider's error is kept as the `cause` of
 * loopchart's ModelError, and from there it reaches logs (`console.error` prints the whole cause
 * chain), error reporters and JSON of the error, while its message reaches traces, session stores,
 * eval datasets and chat pages: fetch's and the AI SDK's errors carry the request URL (a `?key=`
 * in its query), a proxy's body may echo the `Authorization` header, a provider's body may quote
 * the key it was sent. Each adapter hands what it throws through `redactError` once, where the
 * call ends (its `generate`).
 */

const REDACTED = '***';

/** Shorter keys are never searched for in text: a local server's dummy key (`ollama`, `none`) would blank every word like it. */
const MIN_SECRET_LENGTH = 8;

/** Longer names are no field's, query parameter's or header's: not read as one (and no regex runs over a long run of letters). */
const MAX_NAME_LENGTH = 64;

/**
 * Names whose value is a credential: query parameters (`key`, `api_key`, `access_token`, `sig`,
 * `X-Amz-Signature`), headers (`Authorization`, `x-api-key`, `Cookie`) and fields of an error's
 * objects. Ends-with, so `max_tokens` or `keys` are not taken for one.
 */
const SENSITIVE_NAME = /(?:key|token|secret|passw(?:or)?d|pwd|credentials?|signature|sig|auth|authori[sz]ation|cookie)$/i;

export const isSensitiveName = (name: string): boolean => name.length <= MAX_NAME_LENGTH && SENSITIVE_NAME.test(name);

/**
 * A field or header name in text (`Authorization:`, `"x-api-key":`) that holds a credential: a
 * credential's own name, or a compound ending in key, token, secret, password, credentials or
 * signature (`x-api-key`, `access_token`, `apiKey`). The word alone is prose (fetch's "includes
 * credentials: <url>", "invalid token: …") and is left.
 */
const CREDENTIAL_FIELD = /^(?:(?:proxy-)?authorization|(?:set-)?cookie|passw(?:or)?d|secret|apikey)$/i;
const CREDENTIAL_SUFFIX = /(?:key|token|secret|password|credentials?|signature)$/i;

function isCredentialField(name: string): boolean {
  if (name.length > MAX_NAME_LENGTH) return false;
  if (CREDENTIAL_FIELD.test(name)) return true;
  const suffix = CREDENTIAL_SUFFIX.exec(name);
  return suffix !== null && suffix.index > 0;
}

/*
 * The patterns below start a match only where a run of name characters starts (a lookbehind, not
 * \b, which holds at every `-`), and take the run whole (a lookahead capture, which the engine
 * does not backtrack into): a long body of base64url or dashes is read in linear time.
 */

/** `scheme://user:password@`: everything between `//` and the authority's last `@`. */
const URL_USERINFO = /(?<![a-z\d+.-])([a-z][a-z\d+.-]*:\/\/)[^\s/?#]*@/gi;

/**
 * `text` with the user info of every URL in it replaced by `***`: a `user:key@host` URL quoted in
 * an error (ours, or fetch's own "cannot be constructed from a URL that includes credentials")
 * would otherwise carry the key into traces, session stores and eval datasets.
 *
 * @example
 * ```ts
 * redactUrlCredentials('could not reach http://me:sk-1@proxy/v1'); // 'could not reach http://***@proxy/v1'
 * ```
 */
export function redactUrlCredentials(text: string): string {
  return text.replace(URL_USERINFO, `$1${REDACTED}@`);
}

/** `name=value` after `?`, `&`, `;` or a space (a query string, a form body, a config dump): a quoted value to its quote, else up to the next separator. */
const PARAMETER = /(^|[?&;\s])(?=([\w.~%+-]+))\2=("[^"\r\n]*"|'[^'\r\n]*'|[^&#\s"'<>]*)/g;

/**
 * `name: value` or `"name": "value"` (a header dump, a JSON or YAML body): a quoted value to its
 * closing quote, an unquoted one as an optional auth scheme and one word; redacted when the name
 * is a credential field's. (`name=value` is PARAMETER's.)
 */
const NAMED_VALUE = /(?<![\w-])(["']?)(?=([\w-]+))\2\1(\s*:\s*)(?:"([^"\r\n]*)"|'([^'\r\n]*)'|((?:(?:bearer|basic|token|digest|apikey)\s+)?[^\s"',;}]+))/gi;

/** `Bearer <token>` or `Basic <base64>` anywhere (an echoed header), the token told from a word by a digit or a symbol in it. */
const AUTH_SCHEME = /\b(Bearer|Basic)\s+([\w.~+/-]+=*)/gi;

/** Keys whose shape says what they are (OpenAI, Anthropic, OpenRouter; Google; Groq, xAI, Hugging Face, Perplexity, Replicate, GitHub, GitLab; AWS). */
const KEY_SHAPES = [
  /\b(?:sk|rk|pk)-[\w-]{16,}/g,
  /\bAIza[\w-]{30,}/g,
  /\b(?:gsk|xai|hf|pplx|r8|ghp|gho|ghs|github_pat|glpat)[-_][\w-]{16,}/g,
  /\bAKIA[0-9A-Z]{16}\b/g,
];

/**
 * `text` with credentials replaced by `***`: every occurrence of each of `secrets` (8 chars or
 * more, as is and URL-encoded), the user info of URLs, the value of a query parameter, header or
 * field named like a credential, a `Bearer`/`Basic` token, and keys of a known shape (`sk-…`,
 * `AIza…`). What the provider said otherwise is left as it was.
 *
 * @example
 * ```ts
 * redactText('GET https://h/v1?key=abc123 failed'); // 'GET https://h/v1?key=*** failed'
 * redactText('Authorization: Bearer sk-proj-0123456789abcdef'); // 'Authorization: ***'
 * ```
 */
export function redactText(text: string, secrets: readonly string[] = []): string {
  let out = text;
  for (const secret of secrets) {
    if (secret.length < MIN_SECRET_LENGTH) continue;
    for (const form of new Set([secret, encodeURIComponent(secret)])) out = out.split(form).join(REDACTED);
  }
  out = redactUrlCredentials(out);
  out = out.replace(PARAMETER, (whole, before: string, name: string, value: string) => {
    if (!isSensitiveName(decodeName(name))) return whole;
    const quote = value.startsWith('"') || value.startsWith("'") ? value[0] : '';
    return `${before}${name}=${quote}${REDACTED}${quote}`;
  });
  out = out.replace(NAMED_VALUE, (whole, quote: string, name: string, separator: string, doubleQuoted?: string, singleQuoted?: string) => {
    if (!isCredentialField(name)) return whole;
    if (doubleQuoted !== undefined) return `${quote}${name}${quote}${separator}"${REDACTED}"`;
    if (singleQuoted !== undefined) return `${quote}${name}${quote}${separator}'${REDACTED}'`;
    return `${quote}${name}${quote}${separator}${REDACTED}`;
  });
  out = out.replace(AUTH_SCHEME, (whole, scheme: string, token: string) => (token.length >= MIN_SECRET_LENGTH && /[\d.~+/=_-]/.test(token) ? `${scheme} ${REDACTED}` : whole));
  for (const shape of KEY_SHAPES) out = out.replace(shape, REDACTED);
  return out;
}

/**
 * The credentials among request headers, to look for as they are: each value whose header is named
 * like one (`authorization`, `x-api-key`, `cookie`), and the token of an `authorization` value
 * with a scheme (`Bearer sk-…` gives `sk-…` too).
 */
export function headerSecrets(headers: Record<string, string>): string[] {
  const out: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (typeof value !== 'string' || !isSensitiveName(name)) continue;
    out.push(value);
    const token = /^\S+\s+(\S+)$/.exec(value.trim())?.[1];
    if (token) out.push(token);
  }
  return out;
}

function decodeName(name: string): string {
  try {
    return decodeURIComponent(name);
  } catch {
    return name;
  }
}

/** Errors within errors, objects within them: deeper than this is cut (an error from a cycle of wrappers). */
const MAX_DEPTH = 12;

/**
 * `error` as it may leave loopchart: a copy with `redactText` applied to every string in it and
 * down its whole chain (`message`, `stack`, `cause`, `AggregateError.errors`, and every own field,
 * enumerable or not, such as the AI SDK's `url`, `responseBody`, `responseHeaders` and `data`);
 * a field named like a credential (`authorization`, `apiKey`, `set-cookie`) loses its string
 * value whatever it says. Each error keeps its prototype (`instanceof`, `isInstance`, the AI SDK's
 * markers) and its numbers, flags and codes (`status`, `statusCode`, `retryable`, `isRetryable`,
 * `retryAfterMs`, `code`, `errno`), which is what the retry policy and the fallback read. Objects
 * that are neither errors, arrays nor plain records (a `Response`, `Headers`, a `Buffer` of the
 * body) become a `[Name]` placeholder: they cannot be copied safely. The original is not changed
 * (the provider may still hold it), and an abort error is returned as it is: it is the caller's
 * own reason, which the caller may compare.
 *
 * @example
 * ```ts
 * const thrown = new TypeError('fetch failed', { cause: new Error('GET https://h/v1?key=abc123 refused') });
 * const safe = redactError(thrown) as TypeError;
 * console.log((safe.cause as Error).message); // 'GET https://h/v1?key=*** refused'
 * ```
 */
export function redactError(error: unknown, secrets: readonly string[] = []): unknown {
  if (isAbortError(error)) return error;
  return new Redaction(secrets).value(error, 0, undefined);
}

/** A property that is left out of the copy (a function). */
const SKIP = Symbol('skip');

class Redaction {
  private readonly copies = new Map<object, unknown>();
  private readonly secrets: readonly string[];

  constructor(secrets: readonly string[]) {
    this.secrets = secrets;
  }

  value(value: unknown, depth: number, name: string | undefined): unknown {
    if (typeof value === 'string') return name !== undefined && isSensitiveName(name) ? REDACTED : redactText(value, this.secrets);
    if (typeof value === 'function') return SKIP;
    if (typeof value !== 'object' || value === null) return value;
    const copied = this.copies.get(value);
    if (copied !== undefined) return copied;
    if (depth > MAX_DEPTH) return '[omitted: nested too deep]';
    if (isError(value)) return this.error(value, depth);
    if (Array.isArray(value)) {
      const copy: unknown[] = [];
      this.copies.set(value, copy);
      for (const item of value) {
        const redacted = this.value(item, depth + 1, undefined);
        copy.push(redacted === SKIP ? undefined : redacted);
      }
      return copy;
    }
    if (value instanceof URL) return redactText(value.href, this.secrets);
    if (value instanceof Date) return new Date(value.getTime());
    const prototype: unknown = Object.getPrototypeOf(value);
    if (prototype !== Object.prototype && prototype !== null) return `[${constructorName(value)}]`;
    const copy: Record<string, unknown> = {};
    this.copies.set(value, copy);
    for (const key of Object.keys(value)) {
      const redacted = this.value(read(value, key), depth + 1, key);
      if (redacted !== SKIP) copy[key] = redacted;
    }
    return copy;
  }

  /**
   * A copy made by the Error constructor (so it is a native error: `util.inspect` prints its stack
   * and causes, structuredClone takes it) given the original's prototype and own properties.
   */
  private error(original: Error, depth: number): Error {
    const message = redactText(String(read(original, 'message') ?? ''), this.secrets);
    const copy = new Error(message);
    // Formatted now, under Error's prototype: V8 formats a stack on first read, through the
    // prototype's name getter, which DOMException's refuses for any object but its own.
    void copy.stack;
    this.copies.set(original, copy);
    try {
      Object.setPrototypeOf(copy, Object.getPrototypeOf(original));
      this.fields(original, copy, depth);
    } catch {
      // A prototype or a property that cannot be set (a proxy refusing it): a plain Error with the
      // redacted message and name, its fields as far as they were copied.
      Object.setPrototypeOf(copy, Error.prototype);
      Object.defineProperty(copy, 'name', { value: redactText(String(read(original, 'name') ?? 'Error'), this.secrets), enumerable: false, writable: true, configurable: true });
    }
    return copy;
  }

  private fields(original: Error, copy: Error, depth: number): void {
    const own = new Set<PropertyKey>(Reflect.ownKeys(original));
    if (!own.has('stack')) delete (copy as { stack?: unknown }).stack;
    for (const key of own) {
      if (key === 'message') continue;
      const descriptor = Object.getOwnPropertyDescriptor(original, key)!;
      const redacted = this.value('value' in descriptor ? descriptor.value : read(original, key), depth + 1, typeof key === 'string' ? key : undefined);
      if (redacted === SKIP) continue;
      Object.defineProperty(copy, key, { value: redacted, enumerable: descriptor.enumerable ?? false, writable: true, configurable: true });
    }
    // Inherited getters that check their receiver (DOMException's name and code) would throw on
    // the copy: what they read on the original becomes an own property of the copy.
    for (const key of ['name', 'code'] as const) {
      if (own.has(key)) continue;
      const wanted = read(original, key);
      let got: unknown;
      try {
        got = (copy as unknown as Record<string, unknown>)[key];
      } catch {
        got = SKIP;
      }
      if (got !== wanted) Object.defineProperty(copy, key, { value: this.value(wanted, depth + 1, key), enumerable: false, writable: true, configurable: true });
    }
  }
}

function isError(value: object): value is Error {
  return value instanceof Error || Object.prototype.toString.call(value) === '[object Error]';
}

/** A property's value; a getter that throws reads as undefined. */
function read(value: object, key: PropertyKey): unknown {
  try {
    return (value as Record<PropertyKey, unknown>)[key];
  } catch {
    return undefined;
  }
}

function constructorName(value: object): string {
  const name = read(read(value, 'constructor') as object ?? {}, 'name');
  return typeof name === 'string' && name !== '' ? name : 'object';
}
