import { createHash, randomUUID } from 'node:crypto';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { ScopeSchema } from '../agent/protocol/scope.js';
import { isChildSessionId } from '../agent/subagents/subagents.js';
import { IDEMPOTENCY_KEY_META } from '../mcp/client.js';
import { isMcpServerSessionId, MCP_SERVER_NAMESPACE } from '../sessions/surface-ids.js';
import { sessionIdProblem } from '../stores/step.js';
import { SESSION_ID_META } from './result.js';

/**
 * Which stored sessions one caller's calls run in, and whose they are. Every session a call runs
 * in is made in the namespace of its tool and caller, `mcp/<tool>/<caller tag>/<id>`, and stored
 * with its caller's scope: the caller the product named (an HTTP `authorize` answer, a stdio or
 * `connect` caller), or, for a connection without one, a scope of that connection's own. The
 * namespace is what records that a session is this tool's, made by this server for this caller:
 * a chat's session and another tool's have the same scope and another name. A call continues a
 * session by its id (the one a result gave) only under its own tool and tag; a name the client
 * chose is its session `mcp/<tool>/<tag>/name-<hash of the name>`, and a name that is a session
 * of another surface (stored as named) is refused. An idempotency key names
 * `mcp/<tool>/<tag>/<hash of the key>`, so two callers' equal keys are two sessions. The tag and
 * the scope are computed here from who the product says is calling, never read from the client,
 * so a client cannot claim another caller's.
 */

/** Who calls, as the product authenticated them (an HTTP `authorize` answer, a stdio `caller`): also the sessions' memory scope. */
export const CallerSchema = ScopeSchema;

/** The caller of a stdio server not told one: its one client, the local user who started it. */
export const STDIO_CALLER = 'local';

/** A call's `_meta`, as far as loopchart reads it (a client's other keys are left alone). */
const CallMetaSchema = z.looseObject({
  [SESSION_ID_META]: z.string().min(1, 'must not be empty').max(500, 'must be at most 500 characters').optional(),
  [IDEMPOTENCY_KEY_META]: z.string().min(1, 'must not be empty').max(1_000, 'must be at most 1000 characters').optional(),
});

/** The session a call runs in: the one its session id names (`named`), the one its idempotency key gives (`repeat`), or new. */
export interface CallSession {
  sessionId: string;
  repeat: boolean;
  named: boolean;
  /** A name the client chose (not in the server's namespace), stored as `sessionId`: a session stored under this name is another surface's. */
  chosen?: string | undefined;
}

/** One connection's caller: the sessions it may name, and the scope its sessions are stored with. */
export class CallerSessions {
  /** The scope every session of this caller is stored with (and checked against): the caller, or the connection's own. */
  readonly scope: string;
  readonly #tag: string;

  /** Without a caller, the connection is its own caller: nothing it makes is reachable from another connection. */
  constructor(caller: string | undefined) {
    this.scope = caller ?? `mcp-connection:${randomUUID()}`;
    this.#tag = createHash('sha256').update(JSON.stringify(['caller', this.scope])).digest('hex').slice(0, 24);
  }


  /** The session of a call to `tool` with this `_meta` (see the class); a malformed `_meta` is `InvalidParams`. */
  sessionOf(tool: string, meta: unknown): CallSession {
    const parsed = CallMetaSchema.safeParse(meta ?? {});
    if (!parsed.success) throw new McpError(ErrorCode.InvalidParams, `the call's _meta is malformed: ${z.prettifyError(parsed.error)}`);
    const prefix = `${MCP_SERVER_NAMESPACE}${tool}/${this.#tag}/`;
    const named = parsed.data[SESSION_ID_META];
    if (named !== undefined) {
      const problem = sessionIdProblem(named) ?? (isChildSessionId(named) ? "it is a subagent's session, driven by its parent's call" : null);
      if (problem) throw new McpError(ErrorCode.InvalidParams, `_meta['${SESSION_ID_META}'] is not a session id a call may name: ${problem}`);
      if (isMcpServerSessionId(named)) {
        // The server's own names are a caller's only under its own tool and tag: a tag is a hash of
        // a caller name (guessable) and a key often is too, so a name made in another's namespace
        // would take the session that caller's key names before that caller's first call does; and
        // another tool's session is another agent's conversation.
        if (!named.startsWith(prefix)) throw notThisCallers(tool);
        return { sessionId: named, repeat: false, named: true };
      }
      // Kept in the namespace, so the name of a chat's session (or any other surface's) never reaches it.
      return { sessionId: `${prefix}name-${createHash('sha256').update(named).digest('hex').slice(0, 32)}`, repeat: false, named: true, chosen: named };
    }
    const key = parsed.data[IDEMPOTENCY_KEY_META];
    if (key !== undefined) return { sessionId: prefix + createHash('sha256').update(key).digest('hex').slice(0, 32), repeat: true, named: false };
    return { sessionId: prefix + randomUUID(), repeat: false, named: false };
  }
}

/**
 * The one answer for a session a caller may not continue: another caller's, another tool's, a
 * chat's or any other surface's. It does not say whose it is.
 */
export const notThisCallers = (tool: string): McpError =>
  new McpError(ErrorCode.InvalidParams, `_meta['${SESSION_ID_META}'] names a session of '${tool}' this caller cannot continue`);
