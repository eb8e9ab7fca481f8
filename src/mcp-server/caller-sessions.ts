import { createHash, randomUUID } from 'node:crypto';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { ScopeSchema } from '../agent/protocol/scope.js';
import { IDEMPOTENCY_KEY_META } from '../mcp/client.js';
import { SESSION_ID_META } from './result.js';

/**
 * Which stored sessions one caller's calls run in. Every session the server makes is named
 * `mcp/<tool>/<tag>/<id>`, the tag a hash of the caller: a call continues (by session id) or
 * repeats (by idempotency key) only sessions under its own caller's tag. A session id the server
 * gave this caller continues that session; any other name is the client's own name for a
 * conversation, kept inside this caller's namespace as a chat id is under `chatKey` (another
 * caller's session id, a chat's, a name never used before: each is a session of this caller's,
 * new the first time), so nothing outside the namespace is ever opened, and the answer never says
 * whether such a session exists. The tag is computed here from who the product says is calling,
 * never read from the client, so a client cannot claim another caller's tag.
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

/** The part after the tag: a random UUID (a new session) or 32 hex digits of an idempotency key's hash. */
const OWN_ID = /^(?:[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;

/** The session a call runs in: the one its session id names, the one its idempotency key gives (`repeat`), or new. */
export interface CallSession {
  sessionId: string;
  repeat: boolean;
}

/** 32 hex digits of a name the client chose, in its own domain: a conversation's name and an idempotency key never give one session. */
const hashed = (domain: 'name' | 'key', value: string): string => createHash('sha256').update(JSON.stringify([domain, value])).digest('hex').slice(0, 32);

/** One connection's caller: the sessions it may name, and the scope its sessions are stored with. */
export class CallerSessions {
  /** The memory scope of the sessions made for this caller; none for a connection without a caller. */
  readonly scope: string | undefined;
  readonly #tag: string;

  /** Without a caller, the connection is its own caller: nothing it makes is reachable from another connection. */
  constructor(caller: string | undefined) {
    this.scope = caller;
    const who = caller === undefined ? ['connection', randomUUID()] : ['caller', caller];
    this.#tag = createHash('sha256').update(JSON.stringify(who)).digest('hex').slice(0, 24);
  }

  /** The session of a call to `tool` with this `_meta` (see the class); a malformed `_meta` is `InvalidParams`. */
  sessionOf(tool: string, meta: unknown): CallSession {
    const parsed = CallMetaSchema.safeParse(meta ?? {});
    if (!parsed.success) throw new McpError(ErrorCode.InvalidParams, `the call's _meta is malformed: ${z.prettifyError(parsed.error)}`);
    const prefix = `mcp/${tool}/${this.#tag}/`;
    const named = parsed.data[SESSION_ID_META];
    if (named !== undefined) {
      const given = named.startsWith(prefix) && OWN_ID.test(named.slice(prefix.length));
      return { sessionId: given ? named : prefix + hashed('name', named), repeat: false };
    }
    const key = parsed.data[IDEMPOTENCY_KEY_META];
    if (key !== undefined) return { sessionId: prefix + hashed('key', key), repeat: true };
    return { sessionId: prefix + randomUUID(), repeat: false };
  }
}
