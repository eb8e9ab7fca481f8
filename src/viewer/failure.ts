import { LoopchartError, type LoopchartErrorCode } from '../errors.js';
import { reportFailure as reportOnServer } from '../failure-report.js';

/**
 * What the viewer tells a client of a failure, and what stays on the server. A store's error can
 * carry a connection string, a file path or another session's data, and the viewer answers
 * whoever `authorize` lets through: a client reads a fixed sentence and a short reference, and the
 * error itself goes to the server's stderr under that reference.
 */

/** An error as a page shows it: its class, stable code and message (never a stack). */
export interface ErrorView {
  name: string;
  code: string;
  message: string;
}

/**
 * The errors that say what is wrong with this session's own stored row (it is corrupt, or from a
 * newer loopchart) or with the id asked for: the page of that session shows them, so its reader
 * knows why it looks empty. Nothing in them comes from the database or its driver.
 */
const SESSION_OWN_CODES: ReadonlySet<LoopchartErrorCode> = new Set(['CorruptSession', 'SessionRow', 'InvalidSessionId']);

/**
 * Writes `error` to the server's stderr under a new reference, and returns the reference (the
 * text a client is given instead of the error).
 *
 * @example
 * ```ts
 * const reference = reportFailure('GET /', new Error('connect ECONNREFUSED'));
 * console.log(`Internal error (reference ${reference})`);
 * ```
 */
export function reportFailure(what: string, error: unknown): string {
  return reportOnServer(`viewer: ${what}`, error);
}

/** The sentence a client reads for a failure reported under `reference`. */
export const failureText = (reference: string): string => `the viewer could not read the store (reference ${reference}); the error is in the server's log under that reference`;

/**
 * A store error as a page shows it: this session's own unreadable row as its typed error; any
 * other failure (the database, its driver, a bug) as a fixed sentence with a reference, the error
 * itself reported on the server.
 *
 * @example
 * ```ts
 * const shown = errorView(new Error('password authentication failed for user "admin"'));
 * console.log(shown.code, shown.message.includes('admin')); // Internal false
 * ```
 */
export function errorView(error: unknown, what = 'reading the store'): ErrorView {
  if (LoopchartError.isInstance(error) && SESSION_OWN_CODES.has(error.code)) return { name: error.name, code: error.code, message: error.message };
  return { name: 'Error', code: 'Internal', message: failureText(reportFailure(what, error)) };
}
