import { z } from 'zod';

/**
 * Why `value` is no Restate ingress URL to call, or null. An ingress URL is an http(s) URL with
 * no credentials (fetch refuses them, and every error naming the ingress would show them) and no
 * query or fragment (each call appends `/<object>/<key>/<handler>`, which would land in them).
 * The reasons never repeat the URL: it may hold a credential.
 *
 * @example
 * ```ts
 * const problem = ingressUrlProblem('ftp://127.0.0.1:8080'); // 'got a ftp: URL'
 * ```
 */
export function ingressUrlProblem(value: unknown): string | null {
  if (typeof value !== 'string') return `got ${value === null ? 'null' : typeof value}`;
  if (!URL.canParse(value)) return 'the text given does not parse as a URL';
  const url = new URL(value);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `got a ${url.protocol} URL`;
  if (url.username !== '' || url.password !== '') return 'the ingress URL must not contain credentials (user:password@)';
  if (url.search !== '' || url.hash !== '') return 'the ingress URL must not have a query or a #fragment';
  return null;
}

/**
 * Restate's own rule for a service or virtual object's name: the pattern of its endpoint manifest
 * (a letter, or `_` and a letter or digit, then letters, digits, `.`, `_` or `-`), and the names
 * its server reserves (any starting `restate`, and `openapi`, in any case). Such a name is one
 * segment of an ingress path as it is (`/<name>/<key>/<handler>`), so it is used unencoded.
 */
const SERVICE_NAME = /^(?:[a-zA-Z]|_[a-zA-Z0-9])[a-zA-Z0-9._-]*$/;

/**
 * Why `value` is no name Restate takes for an object, or null. Checked where a name enters: Restate's
 * SDK refuses only a `/`, and only when the object is bound; another name it would refuse when the
 * worker is registered, and one a client is given would send each call to a path no object answers
 * (`a/b` called `/a/b/<key>/get`).
 *
 * @example
 * ```ts
 * const problem = objectNameProblem('support/v2'); // 'must be a Restate service name: ...'
 * ```
 */
export function objectNameProblem(value: unknown): string | null {
  if (typeof value !== 'string') return `must be a string (got ${value === null ? 'null' : typeof value})`;
  if (!SERVICE_NAME.test(value)) {
    return `must be a Restate service name: a letter (or _ and a letter or digit), then letters, digits, '.', '_' or '-' (got ${JSON.stringify(value.slice(0, 100))})`;
  }
  const lower = value.toLowerCase();
  if (lower.startsWith('restate') || lower === 'openapi') return `Restate reserves the name ${JSON.stringify(value.slice(0, 100))} (every name starting 'restate', and 'openapi')`;
  return null;
}

/**
 * Why `key` cannot be an object's key in an ingress path, or null. Percent-encoded, any other key
 * is one segment of the path; `.` and `..` are not, as a URL resolves them away (percent-encoded
 * too: `/loopchartSchedule/../get` is `/get`), and no URL carries a lone surrogate.
 *
 * @example
 * ```ts
 * const problem = ingressKeyProblem('..'); // "'..' cannot be a key in an ingress path ..."
 * ```
 */
export function ingressKeyProblem(key: string): string | null {
  if (key === '.' || key === '..') return `'${key}' cannot be a key in an ingress path: a URL resolves it away, percent-encoded too`;
  const surrogate = /\p{Cs}/u.exec(key);
  if (surrogate) return `it holds a lone surrogate at index ${surrogate.index} (not well-formed Unicode), which no URL carries`;
  return null;
}

/** An object's name in an options schema: refused with `objectNameProblem`'s reason. */
export const ObjectNameSchema = z.custom<string>((value) => objectNameProblem(value) === null, { error: (issue) => objectNameProblem(issue.input) ?? 'must be a Restate service name' });
