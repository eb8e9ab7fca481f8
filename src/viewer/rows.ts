import type { Message } from '../schemas.js';
import type { ReadTraceEntry, TraceEntryOf } from '../sessions/trace.js';
import type { PageData, Row } from './page-model.js';
import { addEntryRow, clip, type RowContext, type RowDetail, type RowInput } from './row-kinds.js';

/**
 * Trace entries as timeline rows, built incrementally (live updates append). Pure and
 * DOM-free: the page runs it, and the tests can too.
 */

/**
 * A timeline row. Its detail is built when it is shown: a 10,000-turn session has 20,000 rows,
 * and their arguments and tool calls pretty-printed up front cost more than the rest of the page.
 */
export type TimelineRow = Omit<Row, 'facts' | 'blocks'> & { detail: () => RowDetail };

/**
 * A model call's prompt as the first `length` messages of `tape`. A trace stores each prompt as
 * a delta on the one before (`promptBase`, `promptDelta`); consecutive prompts that only append
 * share one tape, and a rewrite (a compaction) starts a new one. So taking in a call costs its
 * delta, and showing any call's prompt costs one slice, wherever the row is: rebuilding it
 * from the deltas took seconds on a 10,000-turn session for a row far from the last one shown.
 */
export interface ModelPrompt {
  turn: number;
  tape: Message[];
  length: number;
}

export interface RowBuilder {
  rows: TimelineRow[];
  lastSeq: number;
  costUsd: number;
  /** How the session was left when its last entry is a clean close with the run in flight (else null). */
  closed: string | null;
  /** Each model call's prompt, in order (see `ModelPrompt`). */
  prompts: ModelPrompt[];
  add(entries: readonly ReadTraceEntry[]): void;
  /** Rows made elsewhere (the inspector's), appended as they are. */
  addRows(rows: readonly Row[]): void;
}

const clock = (at: number) => {
  const d = new Date(at);
  return Number.isNaN(d.getTime()) ? '—' : d.toISOString().slice(11, 23);
};

/** The rows of a page's trace (and of rows made elsewhere), built as entries come: each kind's row by its handler (row-kinds.ts). */
export function rowsOf(data: Pick<PageData, 'session' | 'rows'>): RowBuilder {
  const builder: RowBuilder = {
    rows: [],
    lastSeq: 0,
    costUsd: 0,
    closed: null,
    prompts: [],
    add(entries) {
      for (const record of entries) {
        builder.lastSeq = Math.max(builder.lastSeq, record.seq);
        if ('invalid' in record) {
          push({ kind: 'invalid', seq: record.seq, at: 0, title: `unreadable trace entry: ${clip(record.invalid)}`, error: true, blocks: [['problem', record.invalid]] });
          continue;
        }
        addEntryRow(record.seq, record.entry, context);
        builder.costUsd = context.costUsd;
        builder.closed = context.closed;
      }
    },
    addRows(rows) {
      for (const { facts, blocks, ...row } of rows) {
        builder.rows.push({ ...row, detail: () => ({ facts, blocks }) });
        builder.lastSeq = Math.max(builder.lastSeq, row.seq);
      }
    },
  };
  const push = ({ facts = [], blocks = [], ...row }: RowInput) =>
    builder.rows.push({
      time: clock(row.at),
      state: context.state,
      io: context.io,
      error: false,
      modelIndex: builder.prompts.length - 1,
      detail: () => ({ facts, blocks }),
      ...row,
    });
  const context: RowContext = {
    state: 'Start',
    io: 'Idle',
    closedAt: null,
    requested: new Map(),
    sessionId: data.session.sessionId,
    children: data.session.children,
    costUsd: 0,
    closed: null,
    addPrompt: (entry) => builder.prompts.push(nextPrompt(builder.prompts.at(-1), entry)) - 1,
    push,
  };
  builder.addRows(data.rows ?? []);
  builder.add(data.session.trace);
  return builder;
}

/** The prompt of a model call, from the one before it (see `ModelPrompt`). */
function nextPrompt(before: ModelPrompt | undefined, entry: TraceEntryOf<'model'>): ModelPrompt {
  const base = Math.min(entry.promptBase, before?.length ?? 0);
  // Appending to the end of the last prompt's tape changes no earlier prompt: they end before it.
  if (before && base === before.length && before.tape.length === before.length) {
    for (const message of entry.promptDelta) before.tape.push(message);
    return { turn: entry.turn, tape: before.tape, length: before.tape.length };
  }
  const tape = (before?.tape.slice(0, base) ?? []).concat(entry.promptDelta);
  return { turn: entry.turn, tape, length: tape.length };
}

/** The prompt of the model call a row belongs to: one slice of its tape, wherever the row is. */
export function promptAt(builder: RowBuilder, rowIndex: number): { turn: number; messages: Message[] } | null {
  const row = builder.rows[rowIndex];
  const prompt = row && row.modelIndex >= 0 ? builder.prompts[row.modelIndex] : undefined;
  return prompt ? { turn: prompt.turn, messages: prompt.tape.slice(0, prompt.length) } : null;
}
