import { z } from 'zod';
import { fieldsOf, logOf } from '../brain/message-log.js';
import type { AgentContext } from '../agent/core/context.js';
import { NO_APPROVALS } from '../agent/core/call-decisions.js';
import { NO_OPERATIONS } from '../agent/operations/operation-state.js';
import { AgentContextSchema } from '../agent/core/context.js';
import type { BrainState } from '../agent/core/brain-state.js';
import { LoopchartError } from '../errors.js';
import { parseLoopSnapshot } from '../brain/loop-snapshot.js';
import {
  LOOP_SNAPSHOT_VERSION,
  LoopContextSchema,
  StateNameSchema,
  type Message,
} from '../schemas.js';

/**
 * The small state row a durable session stores per step: the driver's context without the
 * conversation, which lives in the append-only log (history first, then pending).
 */
export const SESSION_ROW_VERSION = 3;

/**
 * How a row of an older version becomes the current one: each entry lifts version n to n + 1.
 * A row is migrated when read; the next step stores it in the current version.
 */
const ROW_MIGRATIONS: Record<number, (row: Record<string, unknown>) => Record<string, unknown>> = {
  // Version 2 added tool approvals and the run's start time (budgets).
  1: (row) => ({ ...row, rowVersion: 2, approvals: NO_APPROVALS, runStartedAt: 0 }),
  // Version 3 added the operations' state slices, their hook point in progress and their yields.
  2: (row) => ({ ...row, rowVersion: 3, operations: NO_OPERATIONS }),
};

function migrate(sessionId: string, raw: unknown): unknown {
  let row = raw as Record<string, unknown> | null;
  let version = row?.rowVersion;
  while (typeof version === 'number' && version < SESSION_ROW_VERSION && ROW_MIGRATIONS[version]) {
    row = ROW_MIGRATIONS[version]!(row!);
    version = row.rowVersion;
  }
  if (version !== SESSION_ROW_VERSION) {
    throw new SessionRowError(
      sessionId,
      `unknown state row version ${JSON.stringify(version)} (this build reads versions 1 to ${SESSION_ROW_VERSION})`,
    );
  }
  return row;
}

const count = z.number().int().nonnegative();

/** The driver's own fields are the driver context's, minus what only a live actor holds. */
export const SessionRowSchema = AgentContextSchema.pick({
  policy: true,
  runIndex: true,
  runUsage: true,
  sessionUsage: true,
  extrasTokens: true,
  compactionPasses: true,
  lastRun: true,
  approvals: true,
  runStartedAt: true,
  operations: true,
  // Optional, so no new row version: a row without it (older, or telemetry off) reads as no
  // trace, and a build that predates it drops the field, losing only the link between traces.
  trace: true,
  // Optional for the same reason: a row without it lists the sources again where it is needed.
  offered: true,
  // Optional too: a row without it starts its next model call as attempt 1.
  attempt: true,
  budgetPause: true,
  // Optional as well: a row without it has no policy decisions for its batch.
  policyChecked: true,
  // Optional too: only an agent with an output schema has it.
  outputState: true,
  // Optional too: the active model of a list, and what each model used.
  models: true,
  // Optional too: who has the conversation, once it was handed over.
  agent: true,
  // Optional too: the guardrail check in progress and the input check that passed.
  guard: true,
  // Optional too: calls in doubt after a restart and their decisions.
  doubt: true,
  // Optional too: the memory scope the session was opened with (none: a session without memory).
  scope: true,
  // Optional too: what the batch's child runs (agent tools) spent that the run has counted, so a
  // child resumed after a crash, reporting its usage again, is not counted twice.
  childUsage: true,
  // Optional too: the handoffs the run has made (a run resumed elsewhere goes on counting toward maxHandoffs).
  handoffs: true,
}).extend({
  rowVersion: z.literal(SESSION_ROW_VERSION),
  brain: z.object({
    value: StateNameSchema,
    /** Where the log splits into committed history and the run's pending messages. */
    historyLength: count,
    context: LoopContextSchema.omit({ history: true, pending: true }),
  }),
});
export type SessionRow = z.output<typeof SessionRowSchema>;

/** A stored row that this build cannot read: named, with the session, never silently dropped. */
export class SessionRowError extends LoopchartError {
  readonly sessionId: string;
  constructor(sessionId: string, problem: string, options?: { cause?: unknown }) {
    super('SessionRow', `session '${sessionId}': ${problem}`, options);
    this.sessionId = sessionId;
  }
}

export function encodeRow(context: AgentContext): SessionRow {
  return {
    rowVersion: SESSION_ROW_VERSION,
    brain: { value: context.brain.value, historyLength: logOf(context.brain.context).split, context: fieldsOf(context.brain.context) },
    policy: context.policy,
    runIndex: context.runIndex,
    runUsage: context.runUsage,
    sessionUsage: context.sessionUsage,
    extrasTokens: context.extrasTokens,
    ...(context.compactionPasses && { compactionPasses: context.compactionPasses }),
    lastRun: context.lastRun,
    approvals: context.approvals,
    runStartedAt: context.runStartedAt,
    operations: context.operations,
    ...(context.trace && { trace: context.trace }),
    ...(context.offered && { offered: context.offered }),
    ...(context.attempt && { attempt: context.attempt }),
    ...(context.budgetPause && { budgetPause: context.budgetPause }),
    ...(context.policyChecked?.length && { policyChecked: context.policyChecked }),
    ...(context.outputState && { outputState: context.outputState }),
    ...(context.models && { models: context.models }),
    ...(context.agent && { agent: context.agent }),
    ...(context.guard && { guard: context.guard }),
    ...(context.doubt && { doubt: context.doubt }),
    ...(context.scope !== undefined && { scope: context.scope }),
    ...(context.childUsage && Object.keys(context.childUsage).length > 0 && { childUsage: context.childUsage }),
    ...(context.handoffs !== undefined && { handoffs: context.handoffs }),
  };
}

/**
 * Rebuilds the driver's context from a row and the log, checking both: the row with zod, the
 * brain as a whole with the same checks `LoopMachine.restore` applies.
 */
export function decodeRow(
  sessionId: string,
  raw: unknown,
  log: Message[],
): AgentContext {
  const parsed = SessionRowSchema.safeParse(migrate(sessionId, raw));
  if (!parsed.success) throw new SessionRowError(sessionId, `bad state row: ${z.prettifyError(parsed.error)}`);
  const row = parsed.data;
  if (row.brain.historyLength > log.length) {
    throw new SessionRowError(sessionId, `state row says ${row.brain.historyLength} history messages, the log has ${log.length}`);
  }
  let brain: BrainState;
  try {
    const restored = parseLoopSnapshot({
      version: LOOP_SNAPSHOT_VERSION,
      state: row.brain.value,
      ...row.brain.context,
      history: log.slice(0, row.brain.historyLength),
      pending: log.slice(row.brain.historyLength),
    });
    brain = { value: restored.state, context: restored.context };
  } catch (error) {
    throw new SessionRowError(sessionId, (error as Error).message, { cause: error });
  }
  return {
    sessionId,
    brain,
    policy: row.policy,
    toolJournal: [],
    once: false,
    queued: null,
    runIndex: row.runIndex,
    runUsage: row.runUsage,
    sessionUsage: row.sessionUsage,
    lastRun: row.lastRun,
    extrasTokens: row.extrasTokens,
    ...(row.compactionPasses && { compactionPasses: row.compactionPasses }),
    approvals: row.approvals,
    runStartedAt: row.runStartedAt,
    operations: row.operations,
    ...(row.trace && { trace: row.trace }),
    ...(row.offered && { offered: row.offered }),
    ...(row.attempt && { attempt: row.attempt }),
    ...(row.budgetPause && { budgetPause: row.budgetPause }),
    ...(row.policyChecked && { policyChecked: row.policyChecked }),
    ...(row.outputState && { outputState: row.outputState }),
    ...(row.models && { models: row.models }),
    ...(row.agent && { agent: row.agent }),
    ...(row.guard && { guard: row.guard }),
    ...(row.doubt && { doubt: row.doubt }),
    ...(row.scope !== undefined && { scope: row.scope }),
    ...(row.childUsage && { childUsage: row.childUsage }),
    ...(row.handoffs !== undefined && { handoffs: row.handoffs }),
  };
}
