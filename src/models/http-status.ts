import { ModelError } from '../model.js';
import { redactUrlCredentials } from './redact.js';

export { redactUrlCredentials };

/**
 * HTTP status → ModelError, shared by both adapters so the retry policy sees the same fields
 * whichever client made the call.
 */

/**
 * 408 and 5xx (529 is Anthropic's "overloaded") are transient; 429 is a rate limit that clears.
 * 409 is retryable because with an Idempotency-Key it means "a request with this key is still in
 * flight": trying again later returns the stored result instead of running the call twice.
 */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 429 || status >= 500;
}

/**
 * Delay the server asked for, in ms: `retry-after-ms` (OpenAI, precise) wins over `retry-after`
 * (decimal seconds, possibly fractional, or an HTTP date). Absent or unreadable → undefined.
 * Only decimal digits count as a number: `Number()` alone would read `0x10` as 16 s and `1e3` as
 * 1000 s, delays no server meant.
 */
export function parseRetryAfter(
  get: (name: string) => string | null | undefined,
  now: number = Date.now(),
): number | undefined {
  const ms = decimal(get('retry-after-ms'));
  if (ms !== undefined) return Math.round(ms);
  const header = get('retry-after')?.trim();
  if (!header) return undefined;
  const seconds = decimal(header);
  if (seconds !== undefined) return Math.round(seconds * 1000);
  if (!HTTP_DATE.some((format) => format.test(header))) return undefined;
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

const DECIMAL = /^\d+(\.\d+)?$/;

function decimal(text: string | null | undefined): number | undefined {
  const trimmed = text?.trim();
  return trimmed && DECIMAL.test(trimmed) ? Number(trimmed) : undefined;
}

/**
 * The three date forms RFC 9110 §5.6.7 has recipients accept (IMF-fixdate, RFC 850, asctime).
 * Checked before `Date.parse`, which is lenient enough to read `5, 10` as a date in 2001.
 */
const HTTP_DATE = [
  /^[A-Za-z]{3}, \d{2} [A-Za-z]{3} \d{4} \d{2}:\d{2}:\d{2} GMT$/,
  /^[A-Za-z]{6,9}, \d{2}-[A-Za-z]{3}-\d{2} \d{2}:\d{2}:\d{2} GMT$/,
  /^[A-Za-z]{3} [A-Za-z]{3} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}$/,
];

/**
 * Pulls a human message out of a provider's error body: `{error:{message}}`, `{error:"…"}`,
 * `{message}`, `{detail}`. A web page (a base URL pointing at a site, a proxy's error page) is
 * summarized as its content type and first line, never dumped; other text is cut at 500 chars.
 */
export function providerMessage(body: string, contentType?: string | null): string | undefined {
  const trimmed = body.trim();
  if (trimmed === '') return undefined;
  if (isHtml(trimmed, contentType)) return htmlSummary(trimmed, contentType);
  try {
    const parsed: unknown = JSON.parse(trimmed);
    const found = messageIn(parsed);
    if (found) return found;
  } catch {
    // Not JSON (plain text): fall through to the raw text.
  }
  return trimmed.length > 500 ? `${trimmed.slice(0, 500)}…` : trimmed;
}

const isHtml = (body: string, contentType: string | null | undefined) =>
  /html/i.test(contentType ?? '') || /^<(!doctype\s+html|html[\s>])/i.test(body);

function htmlSummary(body: string, contentType: string | null | undefined): string {
  const first = body.split(/\r?\n/, 1)[0]!.trim();
  const line = first.length > 120 ? `${first.slice(0, 120)}…` : first;
  return `the server sent a web page (${contentType?.trim() || 'HTML'}, ${body.length} chars), not an API reply; its first line: ${line}`;
}

function messageIn(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value === null || typeof value !== 'object') return undefined;
  const record = value as Record<string, unknown>;
  for (const key of ['error', 'message', 'detail'] as const) {
    const inner = record[key];
    if (typeof inner === 'string' && inner !== '') return inner;
    if (inner !== null && typeof inner === 'object') {
      const nested = messageIn(inner);
      if (nested) return nested;
    }
  }
  return undefined;
}

export interface HttpErrorContext {
  status: number;
  /** The provider's own words, when it sent any. */
  message: string | undefined;
  retryAfterMs: number | undefined;
  model: string;
  /** Where the request went, for 404 hints. */
  url: string;
  /** Overrides the status-based judgement (the AI SDK's providers decide `isRetryable` themselves). */
  retryable?: boolean | undefined;
  cause?: unknown;
}

/** A transport error in one line: its message and its cause's (undici hides the socket error there). */
export function describeError(error: unknown): string {
  if (!(error instanceof Error)) return safeString(error);
  const cause = error.cause instanceof Error ? ` (${error.cause.message})` : '';
  return redactUrlCredentials(`${error.message}${cause}`);
}

function safeString(value: unknown): string {
  try {
    return redactUrlCredentials(String(value));
  } catch {
    return 'an unprintable error';
  }
}

/** A typed, actionable error for a failed HTTP call: what the provider said plus what to check. */
export function httpModelError(ctx: HttpErrorContext): ModelError {
  // Providers end their messages with a period; ours add sentences after it, so drop theirs
  // rather than print "api-keys.. Check the API key".
  const said = ctx.message ? `: ${ctx.message.replace(/[\s.]+$/, '')}` : '';
  let text: string;
  switch (ctx.status) {
    case 400:
      text = `the provider rejected the request (400 Bad Request)${said}`;
      break;
    case 401:
      text = `authentication failed (401 Unauthorized)${said}. Check the API key (apiKey option / OPENAI_API_KEY).`;
      break;
    case 403:
      text = `access denied (403 Forbidden)${said}. The API key may not have access to model "${ctx.model}".`;
      break;
    case 404:
      text = `not found (404)${said}. Check the model name "${ctx.model}" and the baseURL (request went to ${ctx.url}).`;
      break;
    case 429:
      text = `rate limited (429)${said}`;
      break;
    default:
      text = `the provider returned HTTP ${ctx.status}${said}`;
  }
  // The URL and the provider's words may both quote a URL with credentials in it.
  return new ModelError(redactUrlCredentials(text), {
    status: ctx.status,
    retryable: ctx.retryable ?? isRetryableStatus(ctx.status),
    retryAfterMs: ctx.retryAfterMs,
    cause: ctx.cause,
  });
}
