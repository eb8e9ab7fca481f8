import { childSessionOf } from '../agent/protocol/keys.js';
import type { TraceEntry, TraceEntryOf } from '../sessions/trace.js';
import { shownText } from './lazy-text.js';
import type { Row } from './page-model.js';

/**
 * The timeline row of each kind of trace entry: one handler per kind, in a table the row
 * builder (rows.ts) looks an entry up in. A handler reads its entry, moves the builder's idea of
 * where the brain and the driver are, and pushes the row (its detail built only when shown).
 */

/** What the detail pane shows of a row besides its title. */
export type RowDetail = Pick<Row, 'facts' | 'blocks'>;

/** A new row: its detail given as `facts` and `blocks`, or built on demand by `detail`; the rest defaults to the builder's position. */
export type RowInput = Partial<Row> & Pick<Row, 'kind' | 'seq' | 'at' | 'title'> & { detail?: (() => RowDetail) | undefined };

/** What a handler reads and moves: the builder's position between entries, and the session's totals. */
export interface RowContext {
  /** The brain's state and the driver's state path after the entries so far. */
  state: string;
  io: string;
  /** The version a clean close recorded, until a step or a reopen follows it. */
  closedAt: number | null;
  /** When each call's approval was requested (for the wait an answer shows). */
  readonly requested: Map<string, number>;
  readonly sessionId: string;
  /** The stored child sessions (an agent tool's row links its child when stored). */
  readonly children: readonly string[] | undefined;
  costUsd: number;
  /** How the session was left when its last entry is a clean close with the run in flight (else null). */
  closed: string | null;
  /** Takes in a model call's prompt; the row's `modelIndex` then points at it. */
  addPrompt(entry: TraceEntryOf<'model'>): number;
  push(row: RowInput): void;
}

/** One line of at most `max` characters; only the text's start is read (a reply may be 23 MB). */
export const clip = (text: string, max = 140): string => {
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
/** What a run closed in flight was doing, from the driver's state path. */
export const waitingIn = (io: string, state: string): string =>
  io.includes('AwaitingApproval') ? 'while waiting for approval' : io.includes('AwaitingDecision') ? 'while a call in doubt waited for a decision' : io.includes('AwaitingOperation') ? "while waiting on an operation's yield" : `with its run in flight (${state})`;
const APPROVAL_STATE = 'Running.AwaitingTools.Working.Approval.AwaitingApproval';
const DOUBT_STATE = 'Running.AwaitingTools.Working.Doubt.AwaitingDecision';
const DOUBT_ACTIONS = { rerun: 'run again', result: 'result given by hand', fail: 'failed' } as const;
const ms = (value: number) => `${value < 10 ? value.toFixed(1) : Math.round(value)} ms`;
/** A fact only when its value is there. */
const maybe = (name: string, value: string | undefined): [string, string][] => (value ? [[name, value]] : []);
const errorBlock = (error: { name: string; message: string } | undefined): [string, string][] => (error ? [['error', `${error.name}: ${error.message}`]] : []);

type Handler<K extends TraceEntry['type']> = (entry: TraceEntryOf<K>, row: RowContext, base: { seq: number; at: number }) => void;

function modelRow(entry: TraceEntryOf<'model'>, row: RowContext, base: { seq: number; at: number }) {
  const modelIndex = row.addPrompt(entry);
  row.state = 'AwaitingModel';
  row.io = 'Running.AwaitingModel';
  const usage = entry.reply?.usage;
  const tokens = usage ? `${usage.inputTokens} in / ${usage.outputTokens} out` : undefined;
  const text = entry.reply?.message.content ?? '';
  const calls = entry.reply?.message.toolCalls ?? [];
  const title = entry.error
    ? `model turn ${entry.turn} failed: ${clip(entry.error.message)} · ${ms(entry.ms)}`
    : `model turn ${entry.turn} · ${tokens ?? 'no usage'} · ${ms(entry.ms)} · ${entry.reply?.finishReason ?? '—'}${calls.length ? ` · ${calls.length} tool call(s)` : ''} · ${clip(text, 60)}`;
  row.push({
    ...base,
    kind: 'model',
    title,
    error: entry.error !== undefined,
    modelIndex,
    detail: () => ({
      facts: [['turn', String(entry.turn)], ...maybe('model', entry.model), ['latency', ms(entry.ms)], ['tokens', tokens ?? '—'], ['finish reason', entry.reply?.finishReason ?? '—'], ['key', entry.key]],
      blocks: [['streamed text', text], ...(calls.length ? ([['tool calls', json(calls, 2)]] as [string, string][]) : []), ...errorBlock(entry.error)],
    }),
  });
}

function toolRow(entry: TraceEntryOf<'tool'>, row: RowContext, base: { seq: number; at: number }) {
  row.state = 'AwaitingTools';
  const result = entry.result;
  const failed = entry.error !== undefined || result?.isError === true;
  // An agent tool's child session is named by the call (see agentTool): linked when stored.
  const child = childSessionOf({ session: row.sessionId, run: entry.run, turn: entry.turn, call: entry.call.id });
  row.push({
    ...base,
    ...(row.children?.includes(child) && { child }),
    kind: 'tool',
    title: `${entry.call.name}(${clip(json(entry.call.args), 50)}) · ${ms(entry.ms)}${failed ? ' · error' : ''} · ${clip(result?.content ?? entry.error?.message ?? '', 50)}`,
    error: failed,
    io: 'Running.AwaitingTools.Executing',
    detail: () => ({
      facts: [['tool', entry.call.name], ['call id', entry.call.id], ['duration', ms(entry.ms)], ['turn', String(entry.turn)]],
      blocks: [['arguments', json(entry.call.args, 2)], ['result', result?.content ?? '(none)'], ...errorBlock(entry.error)],
    }),
  });
}

function finishedRow(entry: TraceEntryOf<'finished'>, row: RowContext, base: { seq: number; at: number }) {
  row.state = 'Terminal';
  row.io = 'Idle';
  if (entry.costUsd !== undefined) row.costUsd += entry.costUsd;
  const { outcome, usage, costUsd } = entry;
  const why = outcome.type === 'Failed' ? ` (${outcome.error.type})` : outcome.type === 'Sealed' ? ` (${clip(outcome.reason, 80)})` : '';
  const cost = costUsd !== undefined ? `$${costUsd.toFixed(6)}` : undefined;
  row.push({
    ...base,
    kind: 'outcome',
    title: `run ${entry.run} ${outcome.type}${why} · ${usage.inputTokens} in / ${usage.outputTokens} out${cost ? ` · ${cost}` : ''}`,
    error: outcome.type === 'Failed',
    facts: [['outcome', outcome.type], ['tokens', `${usage.inputTokens} in / ${usage.outputTokens} out`], ['cost', cost ?? '—']],
    blocks: [['outcome', json(outcome, 2)]],
  });
}

/** The row of each kind of entry. Typed per kind: a kind the trace schema gains and this table lacks does not compile. */
const HANDLERS: { [K in TraceEntry['type']]: Handler<K> } = {
  step: (entry, row) => {
    row.state = entry.state;
    row.io = entry.io;
    row.closedAt = null;
    row.closed = null;
  },
  run: (entry, row, base) => {
    row.state = 'Start';
    row.io = 'Running.Start';
    row.push({ ...base, kind: 'run', title: `run ${entry.run}: ${clip(entry.prompt)}`, detail: () => ({ facts: [['policy', json(entry.policy)]], blocks: [['prompt', entry.prompt]] }) });
  },
  model: modelRow,
  retry: (entry, row, base) =>
    row.push({ ...base, kind: 'retry', title: `retry ${entry.retry} of turn ${entry.turn} in ${ms(entry.delayMs)}: ${clip(entry.error)}`, error: true, state: 'AwaitingModel', io: 'Running.AwaitingModel', blocks: [['error', entry.error]] }),
  fallback: (entry, row, base) =>
    row.push({
      ...base,
      kind: 'fallback',
      title: `model fallback on turn ${entry.turn}: ${entry.from} → ${entry.to} (${entry.trigger})`,
      error: true,
      state: 'AwaitingModel',
      io: 'Running.AwaitingModel',
      facts: [['from', entry.from], ['to', entry.to], ['trigger', entry.trigger]],
      blocks: [['error', entry.error]],
    }),
  tool: toolRow,
  'approval.requested': (entry, row, base) => {
    for (const id of entry.calls) row.requested.set(id, entry.at);
    row.push({ ...base, kind: 'approval', title: `approval requested for ${entry.calls.join(', ')}`, state: 'AwaitingTools', io: APPROVAL_STATE, facts: [['calls', entry.calls.join(', ')]] });
  },
  approval: (entry, row, base) => {
    const since = row.requested.get(entry.toolCallId);
    const wait = since === undefined ? '—' : ms(entry.at - since);
    const decision = entry.approved ? 'approved' : 'denied';
    row.push({
      ...base,
      kind: 'approval',
      title: `${decision} ${entry.toolCallId} by ${entry.by ?? 'unknown'} after ${wait}`,
      state: 'AwaitingTools',
      io: APPROVAL_STATE,
      facts: [['decision', decision], ['by', entry.by ?? 'unknown'], ['wait', wait], ['call id', entry.toolCallId], ...maybe('reason', entry.reason)],
    });
  },
  // Shown as what it was: a decision the run did not take, never as a decision.
  'approval.refused': (entry, row, base) =>
    row.push({
      ...base,
      kind: 'refused',
      title: `refused ${entry.approved ? 'approval' : 'denial'} of ${entry.toolCallId} by ${entry.by ?? 'unknown'}: ${entry.refusal}`,
      error: true,
      facts: [['refused', entry.approved ? 'approve' : 'deny'], ['why', entry.refusal], ['by', entry.by ?? 'unknown'], ['call id', entry.toolCallId], ...maybe('digest', entry.digest)],
      blocks: [['detail', entry.detail]],
    }),
  'doubt.requested': (entry, row, base) =>
    row.push({ ...base, kind: 'approval', title: `in doubt after a restart: ${entry.calls.join(', ')} (started, no result): waiting for a decision`, state: 'AwaitingTools', io: DOUBT_STATE, error: true, facts: [['calls', entry.calls.join(', ')]] }),
  doubt: (entry, row, base) =>
    row.push({
      ...base,
      kind: 'approval',
      title: `${entry.toolCallId} in doubt: ${DOUBT_ACTIONS[entry.action]} by ${entry.by ?? 'unknown'}`,
      state: 'AwaitingTools',
      io: DOUBT_STATE,
      facts: [['decision', entry.action], ['by', entry.by ?? 'unknown'], ['call id', entry.toolCallId], ...maybe('reason', entry.reason)],
    }),
  'doubt.refused': (entry, row, base) =>
    row.push({
      ...base,
      kind: 'refused',
      title: `refused decision (${entry.action}) for ${entry.toolCallId} in doubt by ${entry.by ?? 'unknown'}: ${entry.refusal}`,
      error: true,
      facts: [['refused', entry.action], ['why', entry.refusal], ['by', entry.by ?? 'unknown'], ['call id', entry.toolCallId]],
      blocks: [['detail', entry.detail]],
    }),
  compaction: (entry, row, base) => {
    row.state = 'AwaitingCompaction';
    row.push({
      ...base,
      kind: 'compaction',
      title: `compaction (${entry.reason}) ${entry.before} → ${entry.after} tokens · ${ms(entry.ms)}${entry.rewritten ? '' : ' · nothing rewritten'}`,
      error: entry.error !== undefined,
      io: 'Running.AwaitingCompaction',
      facts: [['reason', entry.reason], ['tokens before', String(entry.before)], ['tokens after', String(entry.after)], ['duration', ms(entry.ms)]],
    });
  },
  repetition: (entry, row, base) =>
    row.push({
      ...base,
      kind: 'repetition',
      title: `repetition: the same ${entry.calls.length} call(s) asked for ${entry.times} times in a row: not run, the model got a note`,
      error: true,
      state: 'AwaitingTools',
      io: 'Running.AwaitingTools',
      facts: [['turn', String(entry.turn)], ['times in a row', String(entry.times)]],
      blocks: [['tool calls', json(entry.calls, 2)]],
    }),
  handoff: (entry, row, base) =>
    row.push({ ...base, kind: 'handoff', title: `handoff after turn ${entry.turn}: ${entry.from} → ${entry.to}`, state: 'AwaitingTools', io: 'Running.HandingOff', facts: [['from', entry.from], ['to', entry.to]] }),
  guardrail: (entry, row, base) => {
    const said = entry.verdict ? (entry.verdict.type === 'feedback' ? `feedback: ${clip(entry.verdict.message)}` : entry.verdict.type) : `failed: ${clip(entry.error?.message ?? '')}`;
    row.push({
      ...base,
      kind: 'guardrail',
      title: `${entry.stage} guardrail ${entry.name}: ${said}`,
      error: entry.verdict?.type !== 'pass',
      state: entry.stage === 'input' ? 'Start' : 'AwaitingModel',
      io: 'Running.Guarding',
      facts: [['check', entry.check], ['duration', ms(entry.ms)]],
      blocks: entry.verdict ? [['verdict', json(entry.verdict, 2)]] : [['error', `${entry.error?.name}: ${entry.error?.message}`]],
    });
  },
  policy: (entry, row, base) => {
    const verdict = entry.verdict;
    const said = verdict ? (verdict.type === 'deny' ? `deny: ${clip(verdict.reason, 80)}` : verdict.type) : `failed: ${clip(entry.error?.message ?? '')}`;
    // Why: the policy that decided, or that every policy allowed (an allow has no single rule).
    const why = !verdict ? 'the policy failed: the run fails' : verdict.type === 'allow' ? 'every tool policy allowed it' : entry.by === undefined ? 'not recorded (a verdict replayed from a journal)' : `tool policy '${entry.by}'`;
    row.push({
      ...base,
      kind: 'policy',
      title: `tool policy on ${entry.call.name}(${clip(json(entry.call.args), 50)}): ${said}${entry.by === undefined ? '' : ` · by ${entry.by}`}`,
      error: entry.error !== undefined || verdict?.type === 'deny',
      state: 'AwaitingTools',
      io: 'Running.AwaitingTools.CheckingApprovals',
      facts: [['verdict', verdict?.type ?? 'none'], ['decided by', why], ['tool', entry.call.name], ['call id', entry.call.id], ['turn', String(entry.turn)], ['duration', ms(entry.ms)]],
      blocks: [['arguments', json(entry.call.args, 2)], ...(verdict?.type === 'deny' ? ([['reason', verdict.reason]] as [string, string][]) : []), ...errorBlock(entry.error)],
    });
  },
  prune: (entry, row, base) =>
    row.push({ ...base, kind: 'prune', title: `pruned ${entry.pruned} tool result(s): ${entry.before} → ${entry.after} tokens`, facts: [['tokens before', String(entry.before)], ['tokens after', String(entry.after)]] }),
  closed: (entry, row, base) => {
    row.closedAt = entry.v;
    row.closed = `closed ${waitingIn(entry.io, entry.state)}`;
    row.push({
      ...base,
      kind: 'closed',
      title: `session closed ${waitingIn(entry.io, entry.state)} (stored at version ${entry.v}); reopening it continues the run`,
      facts: [['stored version', String(entry.v)], ['driver', entry.io]],
    });
  },
  resumed: (entry, row, base) => {
    row.state = entry.state;
    // Reopened after a clean close at this very version: not a crash.
    const clean = row.closedAt === entry.v;
    row.closedAt = null;
    row.closed = null;
    row.push({
      ...base,
      kind: clean ? 'reopen' : 'resume',
      title: clean
        ? `reopened (closed cleanly at version ${entry.v}, ${entry.state}); the run continues`
        : `crash: the process stopped mid-run (stored at version ${entry.v}, ${entry.state}); resumed in a new process`,
      error: !clean,
      facts: [['stored version', String(entry.v)], ['turns taken', String(entry.turns)]],
    });
  },
  event: (entry, row, base) => row.push({ ...base, kind: 'event', title: `host sent ${clip(json(entry.event), 100)}`, blocks: [['event', json(entry.event, 2)]] }),
  finished: finishedRow,
  forked: (entry, row, base) => row.push({ ...base, kind: 'fork', title: `forked from ${entry.from} with its first ${entry.messages} message(s)` }),
};

/** The table as a Map: an entry's kind is stored data, looked up only among the kinds above. */
const byKind = new Map<string, Handler<TraceEntry['type']>>(Object.entries(HANDLERS) as [string, Handler<TraceEntry['type']>][]);

/** Adds the row (or the position change) of one trace entry; a kind without a handler adds nothing. */
export function addEntryRow(seq: number, entry: TraceEntry, row: RowContext): void {
  byKind.get(entry.type)?.(entry as never, row, { seq, at: entry.at });
}
