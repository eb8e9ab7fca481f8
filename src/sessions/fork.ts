import { randomBytes } from 'node:crypto';
import { freshAgentContext } from '../agent/core/context.js';
import { coherentCut } from '../brain/conversation.js';
import { LoopchartError } from '../errors.js';
import type { SessionStore } from '../stores/session-store.js';
import { checkSessionId } from '../stores/step.js';
import { decodeRow, encodeRow } from './session-row.js';
import type { TraceEntry } from './trace.js';

/**
 * A fork that cannot be made as asked (no such session, a cut outside the log). Nothing was written.
 *
 * @example
 * ```ts
 * try { await forkSession(store, 'a', { at: 99 }); } catch (e) { if (ForkError.isInstance(e)) console.error(e.message); }
 * ```
 */
export class ForkError extends LoopchartError {
  readonly sessionId: string;
  constructor(sessionId: string, problem: string) {
    super('InvalidFork', `cannot fork session '${sessionId}': ${problem}`);
    this.sessionId = sessionId;
  }
}

export interface ForkOptions {
  /** Keep the first `at` messages of the log, snapped down to a coherent cut (no tool call without its result). */
  at: number;
  /** The new session's id; default `<id>-fork-<cut>-<random>`. Must not exist yet. */
  as?: string | undefined;
}

export interface ForkResult {
  sessionId: string;
  /** Messages the fork starts with (at most `at`). */
  messages: number;
}

/**
 * Creates a new session from a prefix of another one's log, at rest, ready for a new run (with
 * any agent: another model, other tools). The original is only read. The fork keeps the
 * original's policy and memory scope (it is the same user's conversation); its usage, runs,
 * approvals and operation state start afresh.
 *
 * @example
 * ```ts
 * const fork = await forkSession(store, 'support-42', { at: 6, as: 'support-42-retry' });
 * const otherModelAgent = createAgentMachine({ model: openAICompatibleModel({ baseURL, model: 'gpt-4.1-mini' }) });
 * const session = await DurableSession.open({ machine: otherModelAgent, store, sessionId: fork.sessionId });
 * session.send({ type: 'input', message: 'Try again, more briefly.' });
 * ```
 */
export async function forkSession(store: SessionStore, sessionId: string, options: ForkOptions): Promise<ForkResult> {
  const { at } = options;
  const stored = await store.load(sessionId);
  if (!stored) throw new ForkError(sessionId, 'no such session');
  if (!Number.isInteger(at) || at < 0 || at > stored.messages.length) {
    throw new ForkError(sessionId, `--at must be a whole number from 0 to ${stored.messages.length} (the log's length), got ${at}`);
  }
  // The original row must be readable: a fork of a corrupt session would hide the problem.
  const original = decodeRow(sessionId, stored.state, stored.messages);
  const newId = options.as ?? `${sessionId}-fork-${at}-${randomBytes(3).toString('hex')}`;
  checkSessionId(newId);
  const prefix = stored.messages.slice(0, coherentCut(stored.messages, at));
  // The operations' state described the original's end, not the cut: the fork starts without it.
  const context = freshAgentContext({ sessionId: newId, scope: original.scope, history: prefix, policy: original.policy, queued: null });
  // The brain's own checks on the new row and log, before anything is written.
  decodeRow(newId, encodeRow(context), prefix);
  await store.apply(newId, { expectedVersion: 0, state: encodeRow(context), append: prefix });
  const forked: TraceEntry = { type: 'forked', at: Date.now(), from: sessionId, messages: prefix.length };
  await store.appendTrace?.(newId, [forked]);
  return { sessionId: newId, messages: prefix.length };
}
