import { z } from 'zod';
import { conversationFault } from './conversation.js';
import { InvalidSnapshotError } from '../errors.js';
import { jsonValueFault } from '../json-value.js';
import {
  LOOP_SNAPSHOT_VERSION,
  LoopSnapshotSchema,
  PersistedLoopSnapshotSchema,
  type LoopContext,
  type LoopSnapshotJSON,
  type Message,
  type StateName,
} from '../schemas.js';

export type { LoopSnapshotJSON };

/** A brain snapshot that passed every check: its state name and a context safe to run. */
export interface ParsedLoopSnapshot {
  state: StateName;
  context: LoopContext;
}

/** What is wrong with a snapshot and where: `path` is e.g. `history[3].toolCallId`. */
export interface LoopSnapshotFault {
  path: string;
  problem: string;
}

/** The brain as a plain, versioned JSON object (a deep copy: callers may keep or mutate it). */
export function toLoopSnapshotJSON(state: StateName, context: LoopContext): LoopSnapshotJSON {
  return structuredClone({ version: LOOP_SNAPSHOT_VERSION, state, ...context });
}

/**
 * The one validation every brain snapshot passes before it runs, however it comes in
 * (`LoopMachine.restore`, an agent actor created from a persisted snapshot, a stored session
 * row). It reads `toJSON()` output (`{ version, state, ...context }`) or XState's persisted
 * form (`{ value, context }`, with an optional `status`), and checks:
 * - the schema: field types, counters that are non-negative safe integers;
 * - the history is what a provider accepts, every call answered (see `conversationFault`);
 * - history + pending likewise, where only a turn awaiting its tools (or a finished run) may
 *   end on unanswered calls;
 * - the state agrees with the context: an outcome exactly in Terminal, a compaction reason
 *   exactly while compacting, pending tool calls exactly the unanswered calls that end the
 *   conversation while AwaitingTools, each pre-answer answering its own call;
 * - every tool call's arguments are plain JSON within limits.
 *
 * Returns the first problem, prefixed by its path, or null when the snapshot may run.
 *
 * @example
 * ```ts
 * loopSnapshotProblem(new LoopMachine().toJSON()); // null
 * const json = new LoopMachine().toJSON();
 * loopSnapshotProblem({ ...json, history: [{ role: 'tool', toolCallId: 'x', toolName: 'read', content: '' }] });
 * // "history[0].toolCallId: tool result at position 0 answers no open tool call ('x')"
 * ```
 */
export function loopSnapshotProblem(value: unknown): string | null {
  const result = readSnapshot(value);
  return 'fault' in result ? `${result.fault.path}: ${result.fault.problem}` : null;
}

/**
 * `loopSnapshotProblem` that returns the checked snapshot (a copy: it keeps no reference into
 * `value`) or throws `InvalidSnapshotError` naming the path of the first problem.
 *
 * @example
 * ```ts
 * const saved = JSON.stringify(new LoopMachine().toJSON()); // what an application stored
 * const { state, context } = parseLoopSnapshot(JSON.parse(saved));
 * const snapshot = loopMachine.resolveState({ value: state, context });
 * ```
 */
export function parseLoopSnapshot(value: unknown): ParsedLoopSnapshot {
  const result = readSnapshot(value);
  if ('fault' in result) throw new InvalidSnapshotError(`${result.fault.path}: ${result.fault.problem}`);
  return result.snapshot;
}

type ReadResult = { snapshot: ParsedLoopSnapshot } | { fault: LoopSnapshotFault };

function readSnapshot(value: unknown): ReadResult {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    const got = value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value;
    return { fault: { path: '(root)', problem: `expected a snapshot object, got ${got}` } };
  }
  if ('version' in value) return fromVersioned(value);
  if ('value' in value && 'context' in value) return fromPersisted(value);
  return {
    fault: {
      path: '(root)',
      problem:
        'expected LoopMachine.toJSON() output (with a version) or an XState persisted snapshot (with value and context)',
    },
  };
}

function fromVersioned(json: object): ReadResult {
  const version = (json as { version: unknown }).version;
  if (version !== LOOP_SNAPSHOT_VERSION) {
    const problem = `unknown snapshot version ${String(JSON.stringify(version))} (this build reads version ${LOOP_SNAPSHOT_VERSION})`;
    return { fault: { path: 'version', problem } };
  }
  const parsed = LoopSnapshotSchema.safeParse(json);
  if (!parsed.success) return { fault: zodFault(parsed.error, '') };
  const { version: _version, state, ...context } = parsed.data;
  const fault = brainFault(state, context, '');
  return fault ? { fault } : { snapshot: { state, context } };
}

function fromPersisted(json: object): ReadResult {
  const parsed = PersistedLoopSnapshotSchema.safeParse(json);
  if (!parsed.success) return { fault: zodFault(parsed.error, '') };
  const { status, value: state, context } = parsed.data;
  if (status === 'error') return { fault: { path: 'status', problem: 'the snapshot is of an actor that failed' } };
  const fault = brainFault(state, context, 'context.');
  return fault ? { fault } : { snapshot: { state, context } };
}

function zodFault(error: z.ZodError, prefix: string): LoopSnapshotFault {
  const issue = error.issues[0]!;
  return { path: formatPath(issue.path, prefix), problem: issue.message };
}

function formatPath(path: readonly PropertyKey[], prefix: string): string {
  let out = prefix.replace(/\.$/, '');
  for (const key of path) {
    out += typeof key === 'number' ? `[${key}]` : `${out ? '.' : ''}${String(key)}`;
  }
  return out || '(root)';
}

/** What the schema cannot see: the state against the context, and the conversation's order. */
function brainFault(state: StateName, context: LoopContext, prefix: string): LoopSnapshotFault | null {
  const at = (path: string, problem: string): LoopSnapshotFault => ({ path: `${prefix}${path}`, problem });
  if ((state === 'Terminal') !== (context.outcome !== null)) {
    return at('outcome', state === 'Terminal' ? 'state is Terminal but outcome is missing' : `state is ${state} but an outcome is set`);
  }
  if ((state === 'AwaitingCompaction') !== (context.compactionReason !== null)) {
    return at(
      'compactionReason',
      state === 'AwaitingCompaction'
        ? 'state is AwaitingCompaction but compactionReason is missing'
        : `state is ${state} but compactionReason is set`,
    );
  }
  const { history, pending, pendingTools } = context;
  if (state === 'AwaitingTools' && pendingTools.length === 0) {
    return at('pendingTools', 'state is AwaitingTools but no tool calls are pending');
  }
  if (state !== 'AwaitingTools' && state !== 'Terminal' && pendingTools.length > 0) {
    return at('pendingTools', `state is ${state} but tool calls are pending`);
  }
  if (state === 'AwaitingTools' && context.turnsTaken === 0) {
    return at('turnsTaken', 'state is AwaitingTools but no model reply was counted');
  }
  const committed = conversationFault(history);
  if (committed) return at(messagePath(committed, history.length), `not coherent: ${committed.problem}`);
  const whole = conversationFault(history.concat(pending), { openTail: state === 'AwaitingTools' || state === 'Terminal' });
  if (whole) return at(messagePath(whole, history.length), `not coherent: ${whole.problem}`);
  return pendingToolsFault(state, history.length, pending, context, at);
}

/** `history[i]…` or `pending[j]…` for a position in history + pending. */
function messagePath(fault: { index: number; field: string }, historyLength: number): string {
  const base = fault.index < historyLength ? `history[${fault.index}]` : `pending[${fault.index - historyLength}]`;
  return fault.field ? `${base}.${fault.field}` : base;
}

function pendingToolsFault(
  state: StateName,
  historyLength: number,
  pending: readonly Message[],
  context: LoopContext,
  at: (path: string, problem: string) => LoopSnapshotFault,
): LoopSnapshotFault | null {
  const { pendingTools } = context;
  for (let k = 0; k < pendingTools.length; k++) {
    const { call, preAnswered } = pendingTools[k]!;
    const args = jsonValueFault(call.args, `pendingTools[${k}].call.args`);
    if (args) return at(args.path, args.problem);
    if (preAnswered && preAnswered.toolCallId !== call.id) {
      return at(
        `pendingTools[${k}].preAnswered.toolCallId`,
        `the pre-answer is for '${preAnswered.toolCallId}', not for its call '${call.id}'`,
      );
    }
  }
  // A finished run never dispatches, and discarding its pending leaves its calls behind.
  if (state !== 'AwaitingTools') return null;
  const last = pending.at(-1);
  const calls = last?.role === 'assistant' ? (last.toolCalls ?? []) : [];
  const position = historyLength + pending.length - 1;
  if (calls.length === 0) {
    return at('pendingTools', 'state is AwaitingTools but the conversation does not end with the reply that asked for tools');
  }
  if (calls.length !== pendingTools.length) {
    return at(
      'pendingTools',
      `${pendingTools.length} tool calls are pending but the reply at position ${position} asked for ${calls.length}`,
    );
  }
  for (let k = 0; k < calls.length; k++) {
    const pendingCall = pendingTools[k]!.call;
    const asked = calls[k]!;
    // Ids and names only: a pruner may lighten the arguments in the conversation.
    if (pendingCall.id !== asked.id || pendingCall.name !== asked.name) {
      return at(
        `pendingTools[${k}].call`,
        `pending tool call '${pendingCall.id}' is not call ${k} ('${asked.id}') of the reply at position ${position}`,
      );
    }
  }
  return null;
}
