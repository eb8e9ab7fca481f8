import { callDigest, canonicalJson } from '../agent/approvals/approval-binding.js';
import type { SideEffectInputs, SideEffectOutputs } from '../agent/protocol/executor.js';
import { ExternalEventSchemas } from '../agent/protocol/events.js';
import type { AgentEvent } from '../agent/protocol/agent-event.js';
import { ModelError } from '../model.js';
import type { Message, ToolCall, ToolMessage } from '../schemas.js';
import { shownResult } from '../sessions/replay-guard.js';
import { promptsOf, type TraceEntry, type TraceEntryOf } from '../sessions/trace.js';
import type { EvalCase } from './dataset.js';
import { argsText } from './decisions.js';
import { lastOfEach } from './record.js';

/*
 * What a case's recording (or its hand-written tool answers) says the outside world answered:
 * tool results by call, model replies, compactions and guardrail verdicts by run and turn,
 * approval decisions by call. A quarantined run asks here instead of calling anything.
 */

/** How many system messages a list starts with. */
function leadingSystem(messages: readonly Message[]): number {
  const first = messages.findIndex((message) => message.role !== 'system');
  return first === -1 ? messages.length : first;
}

/** A status the fallback rules read as each trigger (`fallbackTrigger`); a predicate's own ('fallbackOn') has none. */
const TRIGGER_STATUS = new Map<string, number>([
  ['rate-limit', 429],
  ['server-error', 503],
  ['timeout', 408],
  ['context-length', 413],
]);

/** Where a tool call's result came from in a case's run. */
export type ToolSourceKind = 'recorded' | 'live' | 'unrecorded';

/** A call's identity: its tool and its whole arguments (key order aside). */
const callKey = (name: string, args: unknown) => `${name}\u0000${canonicalJson(args)}`;

/** The result a quarantined run gives a call the recording has no result for (decided: the run goes on, the model reads it). */
export function unrecordedResult(call: ToolCall): ToolMessage {
  return {
    role: 'tool',
    toolCallId: call.id,
    toolName: call.name,
    content: `unrecorded call: the recording has no result for ${call.name}(${argsText(call.args)}); tools are quarantined (make this tool live to run it)`,
    isError: true,
  };
}

/**
 * Where a call was made: its run (0-based among the case's runs), its turn and its id. Some models
 * number their calls per reply (c0 each time): an id alone names a call only within its turn.
 * A subagent's call, which no reply of the recording shows, has no known turn (`?`).
 */
const placeOf = (run: number, turn: number | undefined, id: string) => `${run}:${turn ?? '?'}:${id}`;

type Decision = { approved: boolean; reason?: string | undefined; always?: true | undefined };

/** A host's budget raise, as the session takes it. */
export type BudgetRaise = Extract<AgentEvent, { type: 'budget.raise' }>;

/** What the recording gave each time a call was made, by the call's key: the same call again takes the next, the last once they run out. */
class InOrder<T> {
  readonly #items = new Map<string, T[]>();
  readonly #used = new Map<string, number>();

  add(key: string, item: T): void {
    this.#items.set(key, [...(this.#items.get(key) ?? []), item]);
  }

  next(key: string): T | undefined {
    const items = this.#items.get(key);
    if (!items) return undefined;
    const used = this.#used.get(key) ?? 0;
    this.#used.set(key, used + 1);
    return items[Math.min(used, items.length - 1)];
  }
}

export class RecordedWorld {
  /** Results by where the call was made (a dry run asks with the recorded ids), and by name + args, in order, for a live model's new ids. */
  readonly #byPlace = new Map<string, { key: string; result: ToolMessage }>();
  readonly #byCall = new InOrder<ToolMessage>();
  readonly #replies = new Map<string, Extract<TraceEntry, { type: 'model' }>>();
  /** Decisions by where the call was made, with the call they were given for (its key; its digest when the call is a child's, not in the replies). */
  readonly #approvals = new Map<string, { key: string | undefined; digest: string | undefined; decision: Decision }>();
  readonly #approvalsByCall = new InOrder<Decision>();
  readonly #answers: NonNullable<EvalCase['toolResults']>;
  /** Each compaction with the conversation it left: the trace keeps no messages of its own, so they are read off the next model call's prompt. */
  readonly #compactions = new Map<string, { entry: TraceEntryOf<'compaction'>; prompt: Message[] | undefined }>();
  readonly #guardrails = new Map<string, TraceEntryOf<'guardrail'>>();
  /**
   * The model calls that failed over to the next model, by run, turn and the model that failed, in
   * order: two models of one name (two keys of one provider) each fail once, as recorded.
   */
  readonly #fallbacks = new Map<string, TraceEntryOf<'fallback'>[]>();
  /** The budget raises the host sent each run (its own, not a child's), in order, as events the chart reads. */
  readonly #raises = new Map<number, BudgetRaise[]>();

  constructor(evalCase: EvalCase) {
    this.#answers = evalCase.toolResults ?? [];
    const trace = evalCase.recording ? lastOfEach(evalCase.recording.trace) : [];
    const runs = new Map<number, number>();
    /** The call each id names at this point of the trace, and the turn that asked for it. */
    const calls = new Map<string, { call: ToolCall; turn: number }>();
    // Prompts are deltas on the call recorded before, retries included: rebuilt from the whole trace.
    const models = (evalCase.recording?.trace ?? []).filter((entry) => entry.type === 'model');
    const rebuilt = promptsOf(models);
    const prompts = new Map<TraceEntry, Message[]>(models.map((entry, i) => [entry, rebuilt[i]!]));
    let waiting: { entry: TraceEntryOf<'compaction'>; prompt: Message[] | undefined }[] = [];
    // Calls in doubt answered by hand (a result, a failure): the trace keeps the decision, not the result, which the next model call was shown.
    let answeredInDoubt: TraceEntryOf<'doubt'>[] = [];
    for (const entry of trace) {
      if (entry.type === 'run' && !runs.has(entry.run)) runs.set(entry.run, runs.size);
      if (entry.type === 'compaction') {
        const compaction = { entry, prompt: undefined };
        this.#compactions.set(`${runs.get(entry.run) ?? 0}:${entry.turn}`, compaction);
        waiting.push(compaction);
      }
      if (entry.type === 'event') this.#addRaise(runs.get(entry.run) ?? 0, entry.event);
      if (entry.type === 'fallback') {
        const key = `${runs.get(entry.run) ?? 0}:${entry.turn}:${entry.from}`;
        this.#fallbacks.set(key, [...(this.#fallbacks.get(key) ?? []), entry]);
      }
      if (entry.type === 'guardrail') this.#guardrails.set(`${runs.get(entry.run) ?? 0}:${entry.turn}:${entry.stage}:${entry.name}`, entry);
      if (entry.type === 'doubt' && entry.action !== 'rerun') answeredInDoubt.push(entry);
      if (entry.type === 'model') {
        for (const compaction of waiting) if (compaction.entry.run === entry.run) compaction.prompt = prompts.get(entry);
        waiting = [];
        for (const doubt of answeredInDoubt) {
          const made = calls.get(doubt.toolCallId);
          const result = doubt.run === entry.run ? shownResult(prompts.get(entry) ?? [], doubt.toolCallId) : undefined;
          if (made && result) this.#addResult(placeOf(runs.get(entry.run) ?? 0, made.turn, made.call.id), made.call, result);
        }
        answeredInDoubt = [];
      }
      if (entry.type === 'model') {
        this.#replies.set(`${runs.get(entry.run) ?? 0}:${entry.turn}`, entry);
        for (const call of entry.reply?.message.toolCalls ?? []) calls.set(call.id, { call, turn: entry.turn });
      }
      if (entry.type === 'tool' && entry.result) this.#addResult(placeOf(runs.get(entry.run) ?? 0, entry.turn, entry.call.id), entry.call, entry.result);
      if (entry.type === 'approval') {
        const decision = { approved: entry.approved, ...(entry.reason !== undefined && { reason: entry.reason }), ...(entry.always && { always: entry.always }) };
        const made = calls.get(entry.toolCallId);
        const key = made && callKey(made.call.name, made.call.args);
        this.#approvals.set(placeOf(runs.get(entry.run) ?? 0, made?.turn, entry.toolCallId), { key, digest: entry.digest, decision });
        if (key) this.#approvalsByCall.add(key, decision);
      }
    }
  }

  /** A host's budget raise of the run, when the event is one the chart takes (a recording is outside input). */
  #addRaise(run: number, event: Record<string, unknown>): void {
    const raise = ExternalEventSchemas['budget.raise'].safeParse(event);
    if (!raise.success || raise.data.target !== undefined) return;
    this.#raises.set(run, [...(this.#raises.get(run) ?? []), { type: 'budget.raise', budget: raise.data.budget }]);
  }

  /** The next budget raise the host sent in the run (0-based), to answer its budget's pause; undefined when none is left. */
  raise(run: number): BudgetRaise | undefined {
    return this.#raises.get(run)?.shift();
  }

  /** A result the recording shows for a call: where it was made, and after the others of the same call. */
  #addResult(place: string, call: ToolCall, result: ToolMessage): void {
    const key = callKey(call.name, call.args);
    this.#byPlace.set(place, { key, result });
    this.#byCall.add(key, result);
  }

  /**
   * The recorded result for a call made in the case's run `run` (0-based) at `turn`, under the
   * call's own id; undefined when the recording has none.
   */
  toolResult(call: ToolCall, run: number, turn: number): ToolMessage | undefined {
    const key = callKey(call.name, call.args);
    // A dry run asks with the recorded ids; the same id for another call (a live model numbers its calls alike) does not count.
    const recorded = this.#byPlace.get(placeOf(run, turn, call.id));
    // The same call made again takes the next recorded result, the last one once they run out.
    const result = (recorded?.key === key ? recorded.result : undefined) ?? this.#byCall.next(key);
    if (!result) return this.#answer(call);
    return { ...result, toolCallId: call.id, toolName: call.name };
  }

  /** A hand-written answer for the call: by name, and args when the answer gives them. */
  #answer(call: ToolCall): ToolMessage | undefined {
    const answer = this.#answers.find((a) => a.name === call.name && (a.args === undefined || canonicalJson(a.args) === canonicalJson(call.args)));
    return answer && { role: 'tool', toolCallId: call.id, toolName: call.name, content: answer.content, ...(answer.isError && { isError: true }) };
  }

  /**
   * The recorded reply of the run's turn (run: 0-based among the case's runs), as the model's
   * answer; a recorded failure is thrown again. A call of a model whose failure made the run
   * fall back (its trace entry dropped as the call's retry) fails again as the trigger recorded
   * names it, so the run falls back as it did; the next model's call takes the reply.
   */
  reply(run: number, turn: number, model?: string | undefined): SideEffectOutputs['model'] {
    const fallback = model === undefined ? undefined : this.#fallbacks.get(`${run}:${turn}:${model}`)?.shift();
    if (fallback) throw new ModelError(fallback.error, { status: TRIGGER_STATUS.get(fallback.trigger), retryable: false });
    const entry = this.#replies.get(`${run}:${turn}`);
    if (!entry) throw new ModelError(`unrecorded model call: the recording has no reply for run ${run + 1}, turn ${turn}`, { retryable: false });
    if (!entry.reply) throw new ModelError(`recorded failure: ${entry.error?.message ?? 'the model call failed'}`, { retryable: false });
    const { message, finishReason, usage } = entry.reply;
    return {
      message,
      finishReason: (finishReason ?? (message.toolCalls?.length ? 'tool-calls' : 'stop')) as SideEffectOutputs['model']['finishReason'],
      ...(usage && { usage }),
    };
  }

  /**
   * The recorded compaction of the run's turn, as the compactor's answer: unchanged, or the
   * conversation the next model call of the run was sent (less the system parts the request
   * put before it). Undefined when the recording has none; a recorded failure is thrown again.
   */
  compaction(run: number, input: SideEffectInputs['compaction']): SideEffectOutputs['compaction'] | undefined {
    const recorded = this.#compactions.get(`${run}:${input.turn}`);
    if (!recorded) return undefined;
    const { entry, prompt } = recorded;
    if (entry.error) throw new Error(`recorded failure: ${entry.error.message}`);
    if (!entry.rewritten) return { before: input.tokensBefore, after: input.tokensBefore };
    if (!prompt) return undefined;
    const added = Math.max(0, leadingSystem(prompt) - leadingSystem(input.messages));
    return { before: input.tokensBefore, after: entry.after, messages: prompt.slice(added) };
  }

  /** The recorded verdict of one guardrail of the run's turn and stage; undefined when none; a recorded failure is thrown again. */
  guardrail(run: number, input: SideEffectInputs['guardrail']): SideEffectOutputs['guardrail'] | undefined {
    const entry = this.#guardrails.get(`${run}:${input.turn}:${input.stage}:${input.guardrail}`);
    if (!entry) return undefined;
    if (!entry.verdict) throw new Error(`recorded failure: ${entry.error?.message ?? 'the guardrail failed'}`);
    return entry.verdict;
  }

  /**
   * The recorded decision on a call that needed approval, made in the case's run `run` (0-based)
   * at `turn`: by id when the recorded call of that id there is this one (a live model numbers its
   * calls alike: the same id may name another call), else the next decision on the same name +
   * args, the last once they run out.
   */
  approval(call: { id: string; name: string; args: unknown }, run: number, turn: number): Decision | undefined {
    const key = callKey(call.name, call.args);
    const recorded = this.#approvals.get(placeOf(run, turn, call.id)) ?? this.#approvals.get(placeOf(run, undefined, call.id));
    const same = recorded && (recorded.key !== undefined ? recorded.key === key : recorded.digest !== undefined && recorded.digest === callDigest(call));
    return (same ? recorded.decision : undefined) ?? this.#approvalsByCall.next(key);
  }

  /** Tool names the recording ran. */
  toolNames(): Set<string> {
    return new Set([...this.#byPlace.values()].map(({ result }) => result.toolName));
  }
}
