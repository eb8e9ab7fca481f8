import type { Message } from '../schemas.js';
import type { ReadTraceEntry, TraceEntry } from '../sessions/trace.js';
import { shownText } from './lazy-text.js';
import type { PageData, Row } from './page-model.js';
import { childSessionOf } from '../agent/protocol/keys.js';

/**
 * Trace entries as timeline rows, built incrementally (live updates append). Pure and
 * DOM-free: the page runs it, and the tests can too.
 */

/** What the detail pane shows of a row besides its title. */
export type RowDetail = Pick<Row, 'facts' | 'blocks'>;
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

/** One line of at most `max` characters; only the text's start is read (a reply may be 23 MB). */
const clip = (text: string, max = 140) => {
  const shown = shownText(text);
  const line = shown.slice(0, 4 * max).replace(/\s+/g, ' ').trim();
  return line.length > max || shown.length > 4 * max || shown.length < text.length ? `${line.slice(0, max - 1)}…` : line;
};
const json = (value: unknown, indent?: number) => {
  try {
    return JSON.stringify(value, null, indent) ?? 'undefined';
  } catch {
    return String(value);
  }
};
const clock = (at: number) => {
  const d = new Date(at);
  return Number.isNaN(d.getTime()) ? '—' : d.toISOString().slice(11, 23);
};
/** What a run closed in flight was doing, from the driver's state path. */
export const waitingIn = (io: string, state: string) =>
  io.includes('AwaitingApproval') ? 'while waiting for approval' : io.includes('AwaitingDecision') ? 'while a call in doubt waited for a decision' : io.includes('AwaitingOperation') ? "while waiting on an operation's yield" : `with its run in flight (${state})`;
const DOUBT_STATE = 'Running.AwaitingTools.Working.Doubt.AwaitingDecision';
const DOUBT_ACTIONS = { rerun: 'run again', result: 'result given by hand', fail: 'failed' } as const;
const ms = (value: number) => `${value < 10 ? value.toFixed(1) : Math.round(value)} ms`;

export function rowsOf(data: Pick<PageData, 'session' | 'rows'>): RowBuilder {
  let state = 'Start';
  let io = 'Idle';
  const requested = new Map<string, number>();
  /** The version a clean close recorded, until a step or a reopen follows it. */
  let closedAt: number | null = null;
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
        add(record.seq, record.entry);
      }
    },
    addRows(rows) {
      for (const { facts, blocks, ...row } of rows) {
        builder.rows.push({ ...row, detail: () => ({ facts, blocks }) });
        builder.lastSeq = Math.max(builder.lastSeq, row.seq);
      }
    },
  };
  /** A row; its detail given as `facts` and `blocks`, or built on demand by `detail`. */
  const push = ({ facts = [], blocks = [], ...row }: Partial<Row> & Pick<Row, 'kind' | 'seq' | 'at' | 'title'> & { detail?: (() => RowDetail) | undefined }) =>
    builder.rows.push({
      time: clock(row.at),
      state,
      io,
      error: false,
      modelIndex: builder.prompts.length - 1,
      detail: () => ({ facts, blocks }),
      ...row,
    });

  function add(seq: number, entry: TraceEntry) {
    const base = { seq, at: entry.at };
    switch (entry.type) {
      case 'step':
        state = entry.state;
        io = entry.io;
        closedAt = null;
        builder.closed = null;
        return;
      case 'run':
        state = 'Start';
        io = 'Running.Start';
        push({ ...base, kind: 'run', title: `run ${entry.run}: ${clip(entry.prompt)}`, detail: () => ({ facts: [['policy', json(entry.policy)]], blocks: [['prompt', entry.prompt]] }) });
        return;
      case 'model': {
        builder.prompts.push(nextPrompt(builder.prompts.at(-1), entry));
        state = 'AwaitingModel';
        io = 'Running.AwaitingModel';
        const usage = entry.reply?.usage;
        const text = entry.reply?.message.content ?? '';
        const calls = entry.reply?.message.toolCalls ?? [];
        const title = entry.error
          ? `model turn ${entry.turn} failed: ${clip(entry.error.message)} · ${ms(entry.ms)}`
          : `model turn ${entry.turn} · ${usage ? `${usage.inputTokens} in / ${usage.outputTokens} out` : 'no usage'} · ${ms(entry.ms)} · ${entry.reply?.finishReason ?? '—'}${calls.length ? ` · ${calls.length} tool call(s)` : ''} · ${clip(text, 60)}`;
        push({
          ...base,
          kind: 'model',
          title,
          error: entry.error !== undefined,
          modelIndex: builder.prompts.length - 1,
          detail: () => ({
            facts: [
              ['turn', String(entry.turn)],
              ...(entry.model ? ([['model', entry.model]] as [string, string][]) : []),
              ['latency', ms(entry.ms)],
              ['tokens', usage ? `${usage.inputTokens} in / ${usage.outputTokens} out` : '—'],
              ['finish reason', entry.reply?.finishReason ?? '—'],
              ['key', entry.key],
            ],
            blocks: [
              ['streamed text', text],
              ...(calls.length ? ([['tool calls', json(calls, 2)]] as [string, string][]) : []),
              ...(entry.error ? ([['error', `${entry.error.name}: ${entry.error.message}`]] as [string, string][]) : []),
            ],
          }),
        });
        return;
      }
      case 'retry':
        push({ ...base, kind: 'retry', title: `retry ${entry.retry} of turn ${entry.turn} in ${ms(entry.delayMs)}: ${clip(entry.error)}`, error: true, state: 'AwaitingModel', io: 'Running.AwaitingModel', blocks: [['error', entry.error]] });
        return;
      case 'fallback':
        push({
          ...base,
          kind: 'fallback',
          title: `model fallback on turn ${entry.turn}: ${entry.from} → ${entry.to} (${entry.trigger})`,
          error: true,
          state: 'AwaitingModel',
          io: 'Running.AwaitingModel',
          facts: [['from', entry.from], ['to', entry.to], ['trigger', entry.trigger]],
          blocks: [['error', entry.error]],
        });
        return;
      case 'tool': {
        state = 'AwaitingTools';
        const result = entry.result;
        const failed = entry.error !== undefined || result?.isError === true;
        // An agent tool's child session is named by the call (see agentTool): linked when stored.
        const child = childSessionOf({ session: data.session.sessionId, run: entry.run, turn: entry.turn, call: entry.call.id });
        push({
          ...base,
          ...(data.session.children?.includes(child) && { child }),
          kind: 'tool',
          title: `${entry.call.name}(${clip(json(entry.call.args), 50)}) · ${ms(entry.ms)}${failed ? ' · error' : ''} · ${clip(result?.content ?? entry.error?.message ?? '', 50)}`,
          error: failed,
          io: 'Running.AwaitingTools.Executing',
          detail: () => ({
            facts: [
              ['tool', entry.call.name],
              ['call id', entry.call.id],
              ['duration', ms(entry.ms)],
              ['turn', String(entry.turn)],
            ],
            blocks: [
              ['arguments', json(entry.call.args, 2)],
              ['result', result?.content ?? '(none)'],
              ...(entry.error ? ([['error', `${entry.error.name}: ${entry.error.message}`]] as [string, string][]) : []),
            ],
          }),
        });
        return;
      }
      case 'approval.requested':
        for (const id of entry.calls) requested.set(id, entry.at);
        push({ ...base, kind: 'approval', title: `approval requested for ${entry.calls.join(', ')}`, state: 'AwaitingTools', io: 'Running.AwaitingTools.Working.Approval.AwaitingApproval', facts: [['calls', entry.calls.join(', ')]] });
        return;
      case 'approval': {
        const since = requested.get(entry.toolCallId);
        const wait = since === undefined ? '—' : ms(entry.at - since);
        push({
          ...base,
          kind: 'approval',
          title: `${entry.approved ? 'approved' : 'denied'} ${entry.toolCallId} by ${entry.by ?? 'unknown'} after ${wait}`,
          state: 'AwaitingTools',
          io: 'Running.AwaitingTools.Working.Approval.AwaitingApproval',
          facts: [
            ['decision', entry.approved ? 'approved' : 'denied'],
            ['by', entry.by ?? 'unknown'],
            ['wait', wait],
            ['call id', entry.toolCallId],
            ...(entry.reason ? ([['reason', entry.reason]] as [string, string][]) : []),
          ],
        });
        return;
      }
      case 'approval.refused':
        // Shown as what it was: a decision the run did not take, never as a decision.
        push({
          ...base,
          kind: 'refused',
          title: `refused ${entry.approved ? 'approval' : 'denial'} of ${entry.toolCallId} by ${entry.by ?? 'unknown'}: ${entry.refusal}`,
          error: true,
          facts: [
            ['refused', entry.approved ? 'approve' : 'deny'],
            ['why', entry.refusal],
            ['by', entry.by ?? 'unknown'],
            ['call id', entry.toolCallId],
            ...(entry.digest ? ([['digest', entry.digest]] as [string, string][]) : []),
          ],
          blocks: [['detail', entry.detail]],
        });
        return;
      case 'doubt.requested':
        push({ ...base, kind: 'approval', title: `in doubt after a restart: ${entry.calls.join(', ')} (started, no result): waiting for a decision`, state: 'AwaitingTools', io: DOUBT_STATE, error: true, facts: [['calls', entry.calls.join(', ')]] });
        return;
      case 'doubt':
        push({
          ...base,
          kind: 'approval',
          title: `${entry.toolCallId} in doubt: ${DOUBT_ACTIONS[entry.action]} by ${entry.by ?? 'unknown'}`,
          state: 'AwaitingTools',
          io: DOUBT_STATE,
          facts: [['decision', entry.action], ['by', entry.by ?? 'unknown'], ['call id', entry.toolCallId], ...(entry.reason ? ([['reason', entry.reason]] as [string, string][]) : [])],
        });
        return;
      case 'doubt.refused':
        push({
          ...base,
          kind: 'refused',
          title: `refused decision (${entry.action}) for ${entry.toolCallId} in doubt by ${entry.by ?? 'unknown'}: ${entry.refusal}`,
          error: true,
          facts: [['refused', entry.action], ['why', entry.refusal], ['by', entry.by ?? 'unknown'], ['call id', entry.toolCallId]],
          blocks: [['detail', entry.detail]],
        });
        return;
      case 'compaction':
        state = 'AwaitingCompaction';
        push({
          ...base,
          kind: 'compaction',
          title: `compaction (${entry.reason}) ${entry.before} → ${entry.after} tokens · ${ms(entry.ms)}${entry.rewritten ? '' : ' · nothing rewritten'}`,
          error: entry.error !== undefined,
          io: 'Running.AwaitingCompaction',
          facts: [
            ['reason', entry.reason],
            ['tokens before', String(entry.before)],
            ['tokens after', String(entry.after)],
            ['duration', ms(entry.ms)],
          ],
        });
        return;
      case 'repetition':
        push({
          ...base,
          kind: 'repetition',
          title: `repetition: the same ${entry.calls.length} call(s) asked for ${entry.times} times in a row: not run, the model got a note`,
          error: true,
          state: 'AwaitingTools',
          io: 'Running.AwaitingTools',
          facts: [['turn', String(entry.turn)], ['times in a row', String(entry.times)]],
          blocks: [['tool calls', json(entry.calls, 2)]],
        });
        return;
      case 'handoff':
        push({ ...base, kind: 'handoff', title: `handoff after turn ${entry.turn}: ${entry.from} → ${entry.to}`, state: 'AwaitingTools', io: 'Running.HandingOff', facts: [['from', entry.from], ['to', entry.to]] });
        return;
      case 'guardrail': {
        const said = entry.verdict ? (entry.verdict.type === 'feedback' ? `feedback: ${clip(entry.verdict.message)}` : entry.verdict.type) : `failed: ${clip(entry.error?.message ?? '')}`;
        push({
          ...base,
          kind: 'guardrail',
          title: `${entry.stage} guardrail ${entry.name}: ${said}`,
          error: entry.verdict?.type !== 'pass',
          state: entry.stage === 'input' ? 'Start' : 'AwaitingModel',
          io: 'Running.Guarding',
          facts: [['check', entry.check], ['duration', ms(entry.ms)]],
          blocks: entry.verdict ? [['verdict', json(entry.verdict, 2)]] : [['error', `${entry.error?.name}: ${entry.error?.message}`]],
        });
        return;
      }
      case 'prune':
        push({ ...base, kind: 'prune', title: `pruned ${entry.pruned} tool result(s): ${entry.before} → ${entry.after} tokens`, facts: [['tokens before', String(entry.before)], ['tokens after', String(entry.after)]] });
        return;
      case 'closed':
        closedAt = entry.v;
        builder.closed = `closed ${waitingIn(entry.io, entry.state)}`;
        push({
          ...base,
          kind: 'closed',
          title: `session closed ${waitingIn(entry.io, entry.state)} (stored at version ${entry.v}); reopening it continues the run`,
          facts: [['stored version', String(entry.v)], ['driver', entry.io]],
        });
        return;
      case 'resumed': {
        state = entry.state;
        // Reopened after a clean close at this very version: not a crash.
        const clean = closedAt === entry.v;
        closedAt = null;
        builder.closed = null;
        push({
          ...base,
          kind: clean ? 'reopen' : 'resume',
          title: clean
            ? `reopened (closed cleanly at version ${entry.v}, ${entry.state}); the run continues`
            : `crash: the process stopped mid-run (stored at version ${entry.v}, ${entry.state}); resumed in a new process`,
          error: !clean,
          facts: [['stored version', String(entry.v)], ['turns taken', String(entry.turns)]],
        });
        return;
      }
      case 'event':
        push({ ...base, kind: 'event', title: `host sent ${clip(json(entry.event), 100)}`, blocks: [['event', json(entry.event, 2)]] });
        return;
      case 'finished':
        state = 'Terminal';
        io = 'Idle';
        if (entry.costUsd !== undefined) builder.costUsd += entry.costUsd;
        push({
          ...base,
          kind: 'outcome',
          title: `run ${entry.run} ${entry.outcome.type}${entry.outcome.type === 'Failed' ? ` (${entry.outcome.error.type})` : entry.outcome.type === 'Sealed' ? ` (${clip(entry.outcome.reason, 80)})` : ''} · ${entry.usage.inputTokens} in / ${entry.usage.outputTokens} out${entry.costUsd !== undefined ? ` · $${entry.costUsd.toFixed(6)}` : ''}`,
          error: entry.outcome.type === 'Failed',
          facts: [
            ['outcome', entry.outcome.type],
            ['tokens', `${entry.usage.inputTokens} in / ${entry.usage.outputTokens} out`],
            ['cost', entry.costUsd !== undefined ? `$${entry.costUsd.toFixed(6)}` : '—'],
          ],
          blocks: [['outcome', json(entry.outcome, 2)]],
        });
        return;
      case 'forked':
        push({ ...base, kind: 'fork', title: `forked from ${entry.from} with its first ${entry.messages} message(s)` });
        return;
    }
  }

  builder.addRows(data.rows ?? []);
  builder.add(data.session.trace);
  return builder;
}

/** The prompt of a model call, from the one before it (see `ModelPrompt`). */
function nextPrompt(before: ModelPrompt | undefined, entry: Extract<TraceEntry, { type: 'model' }>): ModelPrompt {
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
