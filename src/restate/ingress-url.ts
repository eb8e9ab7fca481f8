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
