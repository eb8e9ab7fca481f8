import { createHash } from 'node:crypto';
import type { Outcome } from '../schemas.js';
import type { TraceEntry } from '../sessions/trace.js';
import { lastOfEach } from './record.js';

/*
 * The decisions of a session, read from its trace, each with the rule that took it as far as the
 * trace records it: the brain's guard for a compaction or a stop (its decision order's names,
 * machines/loop.machine.ts), the driver's part for what it records (the tools a model call was
 * offered, a tool policy's denial or request for approval with the policy that made it, a
 * guardrail's verdict, an approval asked, a seal's reason, a repetition, a handoff). A policy's
 * allow is no decision of its own: the call it lets run is already one (`tools`).
 * Two runs are compared by `what` alone: ids, times and keys never make a difference.
 */

export type DecisionKind = 'model' | 'tools' | 'policy' | 'compact' | 'guardrail' | 'approval' | 'repetition' | 'handoff' | 'fallback' | 'done';

/** One decision: what was decided (compared) and the rule that decided it (shown). */
export interface Decision {
  /** 1-based position in the session's decisions. */
  step: number;
  /** 0-based index of the run among the session's runs (the n-th prompt). */
  run: number;
  kind: DecisionKind;
  what: string;
  rule: string;
}

/** The first decision where two runs part: the step, and each side's decision there (null past its end). */
export interface DecisionDifference {
  step: number;
  recorded: Decision | null;
  got: Decision | null;
}

/**
 * Arguments as compact JSON with sorted keys, for a person to read: cut at 120 characters, a cut
 * one ending in a digest of the whole (`…#1a2b3c4d`), so two calls that differ past the cut read
 * differently (decisions are compared by this text). Equality of arguments is `canonicalJson`'s.
 */
export function argsText(args: unknown): string {
  const sorted = (value: unknown): unknown =>
    Array.isArray(value)
      ? value.map(sorted)
      : value !== null && typeof value === 'object'
        ? Object.fromEntries(Object.keys(value).sort().map((key) => [key, sorted((value as Record<string, unknown>)[key])]))
        : value;
  const text = JSON.stringify(sorted(args)) ?? 'undefined';
  return text.length > 120 ? `${text.slice(0, 120)}…#${createHash('sha256').update(text).digest('hex').slice(0, 8)}` : text;
}

/** The brain's rule for a run's end (a guard of its decision order, or who ended it). */
function doneRule(outcome: Outcome): string {
  switch (outcome.type) {
    case 'Completed':
      return 'brain: the reply asked for no tool (the run completes)';
    case 'MaxTurnsExceeded':
      return 'brain: turnLimitReached (policy.maxTurns)';
    case 'Cancelled':
      return 'brain: cancelRequested';
    case 'Sealed':
      return `driver: sealed (${outcome.reason})`;
    case 'Failed':
      return `driver: failed with ${outcome.error.type}`;
  }
}

const outcomeText = (outcome: Outcome): string =>
  outcome.type === 'Sealed' ? `Sealed: ${outcome.reason}` : outcome.type === 'Failed' ? `Failed ${outcome.error.type}` : outcome.type;

/**
 * The decisions a trace records, in order (retried effects counted once).
 *
 * @example
 * ```ts
 * const trace = (await readSessionTrace(store, 'support-42')).flatMap((r) => ('entry' in r ? [r.entry] : []));
 * for (const d of decisionsOf(trace)) console.log(d.step, d.what, '←', d.rule);
 * ```
 */
export function decisionsOf(trace: readonly TraceEntry[]): Decision[] {
  const decisions: Decision[] = [];
  const runs = new Map<number, number>();
  const runOf = (run: number) => {
    if (!runs.has(run)) runs.set(run, runs.size);
    return runs.get(run)!;
  };
  const add = (run: number, kind: DecisionKind, what: string, rule: string) => decisions.push({ step: decisions.length + 1, run: runOf(run), kind, what, rule });
  // The calls the session's own replies asked for: a subagent's approval surfaces in its parent's
  // trace under the child's call id, but is the child's decision (in the child's session), taken
  // inside the agent tool's call, which an evaluation answers from the recording.
  const own = new Set<string>();
  for (const entry of lastOfEach(trace)) {
    switch (entry.type) {
      case 'run':
        runOf(entry.run);
        break;
      case 'model': {
        const offered = [...entry.tools].sort().join(', ');
        add(entry.run, 'model', `call the model (turn ${entry.turn}) offering [${offered}]`, 'brain: CallLLM (no stop or compaction guard held); driver: the tools offered');
        const calls = entry.reply?.message.toolCalls ?? [];
        for (const call of calls) own.add(call.id);
        if (calls.length > 0) {
          add(entry.run, 'tools', `call tools ${calls.map((call) => `${call.name}(${argsText(call.args)})`).join(', ')}`, 'brain: CallTools (the reply asked for tools)');
        }
        break;
      }
      case 'policy':
        if (entry.verdict && entry.verdict.type !== 'allow') {
          const what = entry.verdict.type === 'deny' ? `deny (${entry.verdict.reason})` : 'ask for approval';
          add(entry.run, 'policy', `tool policy on ${entry.call.name}(${argsText(entry.call.args)}): ${what}`, `tool policy ${entry.by === undefined ? '(its rule not recorded)' : `'${entry.by}'`}`);
        }
        break;
      case 'compaction':
        add(entry.run, 'compact', `compact (${entry.reason})`, entry.reason === 'Emergency' ? 'brain: atEmergencyLine' : 'brain: aboveCompactThreshold');
        break;
      case 'guardrail':
        add(entry.run, 'guardrail', `guardrail ${entry.name} (${entry.stage}): ${entry.verdict?.type ?? `error ${entry.error?.name ?? ''}`.trim()}`, `guardrail '${entry.name}' on the ${entry.stage}`);
        break;
      case 'approval.requested': {
        const asked = entry.calls.filter((id) => own.has(id));
        if (asked.length > 0) add(entry.run, 'approval', `ask approval for ${asked.length} call(s)`, 'driver: the tool needs approval (needsApproval or a tool policy)');
        break;
      }
      case 'approval':
        if (own.has(entry.toolCallId)) add(entry.run, 'approval', `approval ${entry.approved ? 'granted' : 'denied'}`, `decided by ${entry.by ?? 'the host'}${entry.reason ? `: ${entry.reason}` : ''}`);
        break;
      case 'repetition':
        add(entry.run, 'repetition', `answer a batch repeated ${entry.times} times with a note`, 'driver: repetition');
        break;
      case 'handoff':
        add(entry.run, 'handoff', `hand off from ${entry.from} to ${entry.to}`, 'driver: the model called a transfer tool');
        break;
      case 'fallback':
        add(entry.run, 'fallback', `fall back from ${entry.from} to ${entry.to}`, `driver: fallbackOn ${entry.trigger}`);
        break;
      case 'finished':
        add(entry.run, 'done', `done: ${outcomeText(entry.outcome)}`, doneRule(entry.outcome));
        break;
      default:
        break;
    }
  }
  return decisions;
}

/**
 * The first step where `got` decides otherwise than `recorded` (or one ends first), or null when
 * they decide alike throughout.
 *
 * @example
 * ```ts
 * const entriesOf = async (id: string) => (await readSessionTrace(store, id)).flatMap((r) => ('entry' in r ? [r.entry] : []));
 * const difference = firstDifference(decisionsOf(await entriesOf('support-42')), decisionsOf(await entriesOf('support-42-fork')));
 * if (difference) console.log(difference.step, difference.recorded?.what, '→', difference.got?.what);
 * ```
 */
export function firstDifference(recorded: readonly Decision[], got: readonly Decision[]): DecisionDifference | null {
  const length = Math.max(recorded.length, got.length);
  for (let i = 0; i < length; i++) {
    const a = recorded[i] ?? null;
    const b = got[i] ?? null;
    if (a?.what !== b?.what || a?.run !== b?.run) return { step: i + 1, recorded: a, got: b };
  }
  return null;
}
