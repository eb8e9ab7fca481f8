import { isGuardFeedback } from '../agent/guardrails/guardrails.js';
import { isOutputFeedback } from '../agent/structured-output/structured-output.js';
import { digestOf } from '../agent/approvals/approval-binding.js';
import type { Message, ToolCall, ToolMessage } from '../schemas.js';
import { callEnd, claimAnswer, shownApproval, type Answers } from './denials.js';
import { runsOfReplies, type TracedReply } from './reply-runs.js';
import { incompleteOf, type AskedCall, type ChildrenOf, type StoredChild } from './stored-subagents.js';
import type { AiSdkVersion } from './ai-sdk-version.js';
import { approvalIdOf, approvalRequestPart, inDoubtPart } from './ui-chunks.js';

/**
 * A stored conversation as AI SDK UI messages, for a page that (re)loads a chat: each user
 * message is one, and the replies and tool results up to the next user message are one
 * assistant message with a step per reply. Ids are log positions, stable for a stored log.
 * System messages (instructions, compaction summaries) are not shown, nor the user messages
 * loopchart wrote to the model (an output guardrail's feedback, an answer that did not match the
 * output schema): the page did not send them, and its live stream never showed them, so the
 * replies around one stay one assistant message, as they streamed. A call the page denied shows
 * as the stream showed it (see `ShownTo` and `callEnd`), and a subagent's calls, read back from
 * its session, as the stream showed them (see `childParts`).
 */
export interface UIMessageOut {
  id: string;
  role: 'user' | 'assistant';
  parts: Array<Record<string, unknown>>;
}

/**
 * Who the messages are for: the AI SDK version of the page, the chat's stored session id (its
 * approval ids are bound to it), the calls the session's trace says were answered (see
 * denials.ts; each answer is claimed here by one result) and the replies it recorded, which tell
 * each call's run (see reply-runs.ts).
 */
export interface ShownTo {
  version: AiSdkVersion;
  chat: string;
  answers: Answers;
  /** The session's replies with calls, with their runs, as its trace recorded them. */
  replies?: readonly TracedReply[] | undefined;
  /** The calls the session asked a person about (its trace's requests), shown with the data parts the stream sent for them. */
  asked?: readonly AskedCall[] | undefined;
  /** The stored subagents of the messages' calls, by call ordinal (see stored-subagents.ts). */
  children?: ChildrenOf | undefined;
}

export function toUIMessages(messages: readonly Message[], shownTo: ShownTo): UIMessageOut[] {
  const out: UIMessageOut[] = [];
  let assistant: UIMessageOut | undefined;
  const parts = new Map<string, { part: Record<string, unknown>; call: ToolCall; run: number | undefined }>();
  const runs = runsOfReplies(messages, shownTo.replies ?? []);
  const questions = new Questions(shownTo.asked ?? [], true);
  let data = new DataParts([]);
  let ordinal = 0;
  messages.forEach((message, index) => {
    if (message.role === 'system' || (message.role === 'user' && (isGuardFeedback(message) || isOutputFeedback(message)))) return;
    if (message.role === 'user') {
      assistant = undefined;
      out.push({ id: `m${index}`, role: 'user', parts: [{ type: 'text', text: message.content }] });
      return;
    }
    if (!assistant) {
      assistant = { id: `m${index}`, role: 'assistant', parts: [] };
      data = new DataParts(assistant.parts);
      out.push(assistant);
    }
    if (message.role === 'assistant') {
      assistant.parts.push({ type: 'step-start' });
      if (message.content) assistant.parts.push({ type: 'text', text: message.content, state: 'done' });
      const calls = message.toolCalls ?? [];
      for (const call of calls) {
        const part: Record<string, unknown> = { type: `tool-${call.name}`, toolCallId: call.id, state: 'input-available', input: call.args };
        parts.set(call.id, { part, call, run: runs.get(index) });
        assistant.parts.push(part);
      }
      const run = runs.get(index);
      const turn = { calls, questionsOf: (call: ToolCall) => (run === undefined ? undefined : questions.of(call, run)) };
      askedFirst(turn, '', shownTo, data);
      // A subagent's calls come after the calls of the turn that started it, as the live stream sent them.
      for (const call of calls) assistant.parts.push(...childParts(call.id, call, shownTo.children?.get(ordinal++), shownTo));
      askedAgain(turn, '', shownTo, data);
      return;
    }
    const shown = parts.get(message.toolCallId);
    // A call whose run the trace does not tell may be another run's with the same id and arguments: only a denial is taken.
    if (shown) endPart(shown.part, shown.call, message, shownTo.answers, shownTo, { denials: shown.run === undefined, run: shown.run });
  });
  return out;
}

/** What a session asked a person about each call: an approval, whether to run it again after a restart (`doubt`), or both. */
class Questions {
  readonly #byCall = new Map<string, { run: number; kinds: Set<AskedCall['kind']> }>();
  readonly #byRun: boolean;

  /** `byRun`: calls of several runs (a chat's) are told apart by their run; a subagent's session has one. */
  constructor(asked: readonly AskedCall[], byRun: boolean) {
    this.#byRun = byRun;
    for (const { kind, run, toolCallId, digest } of asked) {
      const key = this.#key(toolCallId, digest, run);
      const known = this.#byCall.get(key);
      if (known) known.kinds.add(kind);
      else this.#byCall.set(key, { run, kinds: new Set([kind]) });
    }
  }

  /** What `call` (of run `run`, for a chat's) was asked, with the run that asked it. */
  of(call: ToolCall, run?: number | undefined): { run: number; kinds: ReadonlySet<AskedCall['kind']> } | undefined {
    return this.#byCall.get(this.#key(call.id, digestOf(call), run));
  }

  #key(toolCallId: string, digest: string, run: number | undefined): string {
    return JSON.stringify([toolCallId, digest, this.#byRun ? run : null]);
  }
}

/** The calls of one turn and what each was asked (see `Questions`). */
interface AskedTurn {
  calls: readonly ToolCall[];
  questionsOf: (call: ToolCall) => ReturnType<Questions['of']>;
}

/** The request a page was shown for `call`, under the id it shows the call by (`<via>/<id>` for a subagent's). */
const requestOf = (call: ToolCall, run: number, via: string) => ({ run, digest: digestOf(call), toolCallId: via ? `${via}/${call.id}` : call.id, toolName: call.name, args: call.args });

/** AI SDK 5 has no approval chunk: the requests of a turn's calls were data parts, sent as its batch began (before its subagents' steps). */
function askedFirst({ calls, questionsOf }: AskedTurn, via: string, shownTo: ShownTo, data: DataParts): void {
  if (shownTo.version !== 5) return;
  for (const call of calls) {
    const asked = questionsOf(call);
    if (asked?.kinds.has('approval') && !asked.kinds.has('doubt')) data.add(approvalRequestPart(requestOf(call, asked.run, via), shownTo.chat));
  }
}

/**
 * A call in doubt was asked about once its run was opened again after the restart: after the
 * turn's stored steps (its subagents' too), why it asks, then (AI SDK 5) its request, the page's
 * message being the one that replay built.
 */
function askedAgain({ calls, questionsOf }: AskedTurn, via: string, shownTo: ShownTo, data: DataParts): void {
  for (const call of calls) {
    const asked = questionsOf(call);
    if (!asked?.kinds.has('doubt')) continue;
    data.add(inDoubtPart(requestOf(call, asked.run, via), shownTo.chat));
    if (shownTo.version === 5) data.add(approvalRequestPart(requestOf(call, asked.run, via), shownTo.chat));
  }
}

/**
 * The data parts of one message: one per id, where the first was sent, with the data of the last,
 * as readUIMessageStream keeps a data part sent again under its id (a call asked about again).
 */
class DataParts {
  readonly #parts: Array<Record<string, unknown>>;
  readonly #byId = new Map<unknown, Record<string, unknown>>();

  constructor(parts: Array<Record<string, unknown>>) {
    this.#parts = parts;
  }

  add(part: Record<string, unknown>): void {
    const earlier = this.#byId.get(part.id);
    if (earlier) {
      earlier.data = part.data;
      return;
    }
    this.#byId.set(part.id, part);
    this.#parts.push(part);
  }
}

/**
 * Gives a call's part its end: an answered call shows as the stream showed it to the page that
 * answered (callEnd: one rule for both). `run`: the run the call was made in, whose answer it
 * takes; `denials`: only a denial is taken (a chat's call whose run is not known; a subagent's
 * session has one run: its approvals are taken too).
 */
function endPart(part: Record<string, unknown>, call: ToolCall, result: ToolMessage, answers: Answers, shownTo: ShownTo, claim: { denials: boolean; run?: number | undefined }): void {
  const answer = claimAnswer(answers, call, result, claim);
  const approval = answer && shownApproval(answer, approvalIdOf({ run: answer.run, digest: answer.digest, toolCallId: result.toolCallId }, shownTo.chat));
  Object.assign(part, callEnd(shownTo.version, 'page', result, approval));
}

/**
 * The parts of the stored child of `call` (shown as `via`), as the live stream left them: each of
 * its calls a tool part under `<via>/<id>` with its end, its own children after the calls of the
 * turn that started them; or the marker of a child not shown whole. Its text is not a part: the
 * live stream showed it as the preliminary output of `call`, which its final output replaced.
 */
function childParts(via: string, call: ToolCall, child: StoredChild | undefined, shownTo: ShownTo): Array<Record<string, unknown>> {
  // Read for this call (the log may have changed since).
  if (!child || child.callId !== call.id || child.digest !== digestOf(call)) return [];
  const marker = incompleteOf(via, child);
  const markerPart = marker && { type: 'data-subagent-incomplete', id: `subagent-${via}`, data: marker };
  if (child.kind === 'incomplete') return [markerPart!];
  const out: Array<Record<string, unknown>> = [];
  const data = new DataParts(out);
  const questions = new Questions(child.asked, false);
  const parts = new Map<string, { part: Record<string, unknown>; call: ToolCall }>();
  let ordinal = 0;
  for (const message of child.messages) {
    if (message.role === 'assistant') {
      const calls = message.toolCalls ?? [];
      for (const own of calls) {
        const part: Record<string, unknown> = { type: `tool-${own.name}`, toolCallId: `${via}/${own.id}`, state: 'input-available', input: own.args };
        parts.set(own.id, { part, call: own });
        out.push(part);
      }
      const turn = { calls, questionsOf: (own: ToolCall) => questions.of(own) };
      askedFirst(turn, via, shownTo, data);
      for (const own of calls) out.push(...childParts(`${via}/${own.id}`, own, child.children.get(ordinal++), shownTo));
      askedAgain(turn, via, shownTo, data);
    } else if (message.role === 'tool') {
      const shown = parts.get(message.toolCallId);
      // The child's answers name its calls by its own ids; the page's approval ids by the qualified one.
      if (shown) endPart(shown.part, shown.call, { ...message, toolCallId: `${via}/${message.toolCallId}` }, child.answers, shownTo, { denials: false });
    }
  }
  return markerPart ? [...out, markerPart] : out;
}
