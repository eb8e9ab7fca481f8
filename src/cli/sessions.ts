import { createAgentMachine } from '../../machines/agent.machine.js';
import { runInFlight } from '../agent/protocol/actor-types.js';
import { type AgentContext } from '../agent/core/context.js';
import type { Model } from '../model.js';
import { DurableSession, SessionNotIdleError } from '../sessions/durable-session.js';
import { decodeRow } from '../sessions/session-row.js';
import type { SessionStore, StoredSession } from '../stores/session-store.js';
import { CliError, UsageError } from './errors.js';
import { escapeLine } from './escape.js';
import { cliHint } from './hint.js';
import { openExisting, type StoreLocation } from './store.js';
import { describeOperations, describeState, formatTranscript } from './transcript.js';
import { sessionTree, treeLines, type SessionNode } from './session-tree.js';

export interface Io {
  out(line: string): void;
  err(line: string): void;
}

export interface CommandOptions {
  location: StoreLocation;
  schema?: string;
  agent?: string;
  full: boolean;
  io: Io;
}

/** Runs `work` on the store, or fails with a clear message when there is none. */
export async function withStore<T>(options: CommandOptions, work: (store: SessionStore) => Promise<T>, missing: () => T): Promise<T> {
  const store = await openExisting(options.location, options.schema);
  if (!store) return missing();
  try {
    return await work(store);
  } finally {
    await store.close();
  }
}

export const noStore = (location: StoreLocation) => (): never => {
  throw new CliError(`no session store at ${location.label}`);
};

/** The stored session decoded and validated; typed errors (corrupt rows) pass through. */
export async function loadSession(store: SessionStore, sessionId: string, location: StoreLocation): Promise<{ stored: StoredSession; context: AgentContext }> {
  const stored = await store.load(sessionId);
  if (!stored) throw new CliError(`no session '${escapeLine(sessionId)}' in ${escapeLine(location.label)}`);
  return { stored, context: decodeRow(sessionId, stored.state, stored.messages) };
}

const timestamp = (date: Date) => date.toISOString().replace(/\.\d{3}Z$/, 'Z');

export async function listSessions(options: CommandOptions): Promise<number> {
  const { io, location } = options;
  return withStore(
    options,
    async (store) => {
      const sessions = await store.list();
      if (sessions.length === 0) {
        io.out(`no sessions in ${location.label}`);
        return 0;
      }
      const rows = [
        ['SESSION', 'VERSION', 'MESSAGES', 'UPDATED'],
        ...sessions.map((s) => [escapeLine(s.sessionId), String(s.version), String(s.messageCount), timestamp(s.updatedAt)]),
      ];
      const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
      for (const row of rows) io.out(row.map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column]!))).join('  '));
      return 0;
    },
    () => {
      io.out(`no sessions: ${location.label} does not exist`);
      return 0;
    },
  );
}

export async function showSession(sessionId: string, options: CommandOptions): Promise<number> {
  const { io, location } = options;
  return withStore(
    options,
    async (store) => {
      const { stored, context } = await loadSession(store, sessionId, location);
      const usage = context.sessionUsage;
      io.out(`session ${escapeLine(sessionId)} · version ${stored.version} · ${stored.messages.length} messages · ${location.label}`);
      io.out(`state: ${describeState(context, runInFlight(context.brain))}`);
      io.out(`usage: ${usage.inputTokens} input + ${usage.outputTokens} output tokens over ${context.runIndex} run(s)`);
      for (const line of await describeChildren(store, sessionId, location)) io.out(line);
      for (const line of describeOperations(context, { full: options.full })) io.out(line);
      io.out('');
      io.out(stored.messages.length === 0 ? '(no messages)' : formatTranscript(context, { full: options.full }));
      return 0;
    },
    noStore(location),
  );
}

/** The session's child sessions (agent tools) as a tree, each with its state and usage; none: no lines. */
async function describeChildren(store: SessionStore, sessionId: string, location: StoreLocation): Promise<string[]> {
  const tree = sessionTree((await store.list()).map((s) => s.sessionId), sessionId);
  if (tree.length === 0) return [];
  const described = new Map<string, string>();
  const visit = async (nodes: readonly SessionNode[]): Promise<void> => {
    for (const node of nodes) {
      try {
        const { context } = await loadSession(store, node.sessionId, location);
        const u = context.sessionUsage;
        described.set(node.sessionId, `${describeState(context, runInFlight(context.brain))}; usage ${u.inputTokens} input + ${u.outputTokens} output tokens`);
      } catch (error) {
        // One unreadable child does not hide its parent or its siblings.
        described.set(node.sessionId, `unreadable: ${escapeLine((error as Error).message)}`);
      }
      await visit(node.children);
    }
  };
  await visit(tree);
  return ['children:', ...treeLines(tree, (node) => described.get(node.sessionId)!)];
}

/** Drives nothing: a rewind opens the session at rest, so any agent will do. */
const NO_MODEL: Model = {
  name: 'none',
  generate: () => Promise.reject(new Error('the loopchart CLI does not run models while rewinding')),
};

export async function rewindSession(sessionId: string, length: string, options: CommandOptions): Promise<number> {
  const { io, location } = options;
  const keep = Number(length);
  // Digits past 2^53 are no count a log can hold, and Number would round them: bad usage too.
  if (!/^\d+$/.test(length) || !Number.isSafeInteger(keep)) throw new UsageError(`N must be a whole number of messages to keep, got '${length}'`);
  return withStore(
    options,
    async (store) => {
      const { context } = await loadSession(store, sessionId, location);
      const before = context.brain.context.history.length;
      // resume: false: a run in flight is refused (SessionNotIdleError), never driven from here.
      const session = await DurableSession.open({ machine: createAgentMachine({ model: NO_MODEL }), store, sessionId, resume: false });
      let dropped: number;
      try {
        dropped = await session.rewindTo(keep);
      } catch (error) {
        if (error instanceof SessionNotIdleError) {
          throw new CliError(`${error.message} (${cliHint(`sessions resume ${escapeLine(sessionId)}`)})`, { cause: error });
        }
        throw error;
      } finally {
        await session.close();
      }
      const after = before - dropped;
      if (dropped === 0) {
        io.out(`session ${escapeLine(sessionId)}: nothing dropped; the history has ${before} message(s)`);
      } else {
        const snapped = after < keep ? ` (cut at ${after}: keeping ${keep} would separate a tool call from its result)` : '';
        io.out(`session ${escapeLine(sessionId)}: dropped ${dropped} message(s); the history has ${after} now${snapped}`);
      }
      return 0;
    },
    noStore(location),
  );
}
