import { randomBytes } from 'node:crypto';

/**
 * A failure a remote client must not read, kept on the server: the viewer's and the MCP server's
 * one way to report one (a foundation file, so both layers use it). A store's error can carry a
 * connection string, a file path or another user's data; the client is given a fixed sentence and
 * a short reference, and the error itself goes to the server's stderr under that reference.
 */

/** A new reference: 8 hex digits, enough to find one failure in a log, and nothing about it. */
const newReference = (): string => randomBytes(4).toString('hex');

/**
 * Writes `error` to the server's stderr (console.error) under a new reference, as
 * `loopchart <where> failed (reference <ref>): <error>`, and returns the reference: the text a
 * client is given instead of the error.
 *
 * @example
 * ```ts
 * const reference = reportFailure('viewer: GET /', new Error('connect ECONNREFUSED'));
 * console.log(`Internal error (reference ${reference})`);
 * ```
 */
export function reportFailure(where: string, error: unknown): string {
  const reference = newReference();
  console.error(`loopchart ${where} failed (reference ${reference}):`, error);
  return reference;
}
