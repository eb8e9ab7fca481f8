import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { reportFailure } from '../failure-report.js';
import { SessionBusyError } from '../stores/errors.js';

/**
 * What an MCP client reads of a failure that is not its own doing: a fixed sentence and a
 * reference, the error itself on the server's stderr under it. A store's error (a file path, a
 * connection string with its password, another user's data), an unexpected throw, a product hook
 * that throws (an agent entry's `prompt` function) reach whoever `authorize` lets through, or the editor
 * that started a stdio server, and its logs: before, the JSON-RPC error carried their message.
 * What is the caller's own (its arguments, an unknown tool, its session id, a busy server) is an
 * McpError with its message, thrown as it was made; a run's own outcome is its result, not an error.
 */

/** The InternalError each failure is answered with, already reported (never reported twice). */
const reported = new WeakSet<McpError>();

/**
 * Reports `error` on the server under a new reference (`what` says where it happened) and
 * returns the InternalError a client is answered with: a fixed sentence and that reference.
 */
export function internalError(what: string, error: unknown): McpError {
  const reference = reportFailure(`MCP server: ${what}`, error);
  const answer = new McpError(ErrorCode.InternalError, `the MCP server failed to answer the call (reference ${reference}); the error is in the server's log under that reference`);
  reported.add(answer);
  return answer;
}

/**
 * What a failed tools/call answers its client: an error the server made about the call (any
 * McpError but an InternalError), a session the same caller's other call stepped first
 * (`SessionBusyError`, whose text is the library's: the session id and two versions), or an
 * InternalError already reported, as thrown; anything else reported, as `internalError`.
 */
export function answeredError(what: string, error: unknown): unknown {
  if (error instanceof McpError && (error.code !== ErrorCode.InternalError || reported.has(error))) return error;
  if (SessionBusyError.isInstance(error)) return error;
  return internalError(what, error);
}
