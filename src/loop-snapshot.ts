import { unansweredCall } from './conversation.js';
import { InvalidSnapshotError } from './errors.js';
import {
  LOOP_SNAPSHOT_VERSION,
  LoopSnapshotSchema,
  PersistedLoopSnapshotSchema,
  type LoopContext,
  type LoopSnapshotJSON,
  type StateName,
} from './schemas.js';
import { z } from 'zod';

export type { LoopSnapshotJSON };

/** The brain as a plain, versioned JSON object (a deep copy: callers may keep or mutate it). */
export function toLoopSnapshotJSON(state: StateName, context: LoopContext): LoopSnapshotJSON {
  return structuredClone({ version: LOOP_SNAPSHOT_VERSION, state, ...context });
}

/**
 * Reads either `toJSON()` output or XState's persisted snapshot of the brain, and checks what
 * the schema alone cannot: that the state and the context agree and history is coherent.
 */
export function restoreLoopSnapshot(json: unknown): { state: StateName; context: LoopContext } {
  if (typeof json !== 'object' || json === null) {
    throw new InvalidSnapshotError(`expected an object, got ${json === null ? 'null' : typeof json}`);
  }
  const restored = 'version' in json ? fromVersioned(json) : fromPersisted(json);
  const problem = contradiction(restored.state, restored.context);
  if (problem) throw new InvalidSnapshotError(problem);
  return restored;
}

function fromVersioned(json: object): { state: StateName; context: LoopContext } {
  const version = (json as { version: unknown }).version;
  if (version !== LOOP_SNAPSHOT_VERSION) {
    throw new InvalidSnapshotError(
      `unknown snapshot version ${JSON.stringify(version)} (this build reads version ${LOOP_SNAPSHOT_VERSION})`,
    );
  }
  const { version: _version, state, ...context } = parse(LoopSnapshotSchema, json);
  return { state, context };
}

function fromPersisted(json: object): { state: StateName; context: LoopContext } {
  if (!('value' in json && 'context' in json)) {
    throw new InvalidSnapshotError(
      'expected LoopMachine.toJSON() output (with a version) or an XState persisted snapshot (with value and context)',
    );
  }
  const { value, context } = parse(PersistedLoopSnapshotSchema, json);
  return { state: value, context };
}

function parse<S extends z.ZodType>(schema: S, json: unknown): z.output<S> {
  const parsed = schema.safeParse(json);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues
    .slice(0, 3)
    .map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`);
  throw new InvalidSnapshotError(issues.join('; '));
}

function contradiction(state: StateName, context: LoopContext): string | null {
  if ((state === 'Terminal') !== (context.outcome !== null)) {
    return state === 'Terminal' ? 'state is Terminal but outcome is missing' : `state is ${state} but an outcome is set`;
  }
  if ((state === 'AwaitingCompaction') !== (context.compactionReason !== null)) {
    return state === 'AwaitingCompaction'
      ? 'state is AwaitingCompaction but compactionReason is missing'
      : `state is ${state} but compactionReason is set`;
  }
  if (state === 'AwaitingTools' && context.pendingTools.length === 0) {
    return 'state is AwaitingTools but no tool calls are pending';
  }
  if (state !== 'AwaitingTools' && state !== 'Terminal' && context.pendingTools.length > 0) {
    return `state is ${state} but tool calls are pending`;
  }
  const broken = unansweredCall(context.history);
  return broken ? `history is not coherent: ${broken}` : null;
}
