import type { Message, StateName, Usage } from '../schemas.js';
import type { ReadTraceEntry } from '../sessions/trace.js';
import type { ChartModel } from './chart.js';
import type { ChartLayout } from './chart-geometry.js';

/** What a session page shows: plain JSON, embedded in the page (and in an exported file). */
export interface SessionView {
  sessionId: string;
  version: number;
  messageCount: number;
  updatedAt: string | null;
  /**
   * The typed error of a row this build cannot read, or a reference to a store failure reported on
   * the server (see `errorView`); the rest of the page still shows what can be.
   */
  error: { name: string; code: string; message: string } | null;
  state: {
    brain: StateName;
    /** The driver's state path(s) when last stored (from the trace), e.g. `Running.AwaitingModel`. */
    io: string;
    inFlight: boolean;
    runs: number;
    turns: number;
    usage: Usage;
    outcome: string | null;
    /** With handoffs: the agent that has the conversation and who handed it over (absent: the entry agent). */
    agent?: { name: string; from: string } | undefined;
    /** The operations' persisted state (session row version 3): slices, the point in progress, a yield waited on. */
    operations: {
      slices: Record<string, unknown>;
      point: string | null;
      waiting: { operation: string; reason: string; payload: unknown } | null;
    };
  } | null;
  /** The log, or in a page its last `LOG_SHOWN` messages (the page shows no more of it). */
  messages: Message[];
  /** The log position of `messages[0]` (0, or more in a page given only the log's end). */
  logFrom?: number | undefined;
  trace: ReadTraceEntry[];
  /**
   * The last stored trace entry's seq when the page holds only the trace's start (a served page
   * of a long session: the live stream brings the rest); absent when `trace` is all of it.
   */
  traceTo?: number | undefined;
  /** Its child sessions (agent tools) and theirs, by id: a tool call that started one links to it. */
  children?: string[] | undefined;
}

/** Messages of the log a page holds and shows (a model call's conversation comes from the trace). */
export const LOG_SHOWN = 200;

export interface PageData {
  mode: 'session' | 'inspector';
  /** Whether the page follows the store (server-sent events); false in an exported file. */
  live: boolean;
  eventsUrl: string | null;
  chart: ChartModel;
  driver: ChartModel;
  /**
   * Both charts laid out in Node, in each of their views (folded and unfolded compound states,
   * see chart-fold.ts; the first has every compound state folded). Null: not laid out, the page
   * lists the transitions only.
   */
  layouts: { chart: ChartLayout[] | null; driver: ChartLayout[] | null };
  session: SessionView;
  /** Ready-made rows (the live-actor inspector), shown before the trace's. */
  rows?: Row[] | undefined;
}

/** One line of the timeline, with what the detail pane shows when it is selected. */
export interface Row {
  kind: string;
  seq: number;
  at: number;
  time: string;
  title: string;
  /** The brain state (and driver state) the step happened in: highlighted when selected. */
  state: string;
  io: string;
  error: boolean;
  facts: [string, string][];
  blocks: [string, string][];
  /** Index of the model call (among the trace's model entries) whose prompt applies. */
  modelIndex: number;
  /** The child session this tool call started (an agent tool), when the store has it. */
  child?: string | undefined;
}
