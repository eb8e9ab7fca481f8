import { createHash } from 'node:crypto';
import type { AgentEmitted, AgentOutput } from '../agent/protocol/actor-types.js';
import { digestOf, type ApprovalRequest } from '../agent/approvals/approval-binding.js';
import { APPROVALS_OPERATION } from '../agent/approvals/approval-events.js';
import { BUDGET_OPERATION } from '../agent/budget/budget-pause.js';
import { FINAL_ANSWER_TOOL } from '../agent/structured-output/structured-output.js';
import { routeOf } from '../agent/subagents/subagents.js';
import type { AssistantMessage, Message, ToolCall, ToolMessage } from '../schemas.js';
import type { AiSdkVersion } from './ai-sdk-version.js';
import { addAnswer, callEnd, claimAnswer, shownApproval, type Answer, type Answers, type CallEnd, type ShownIn } from './denials.js';
import { incompleteOf, type ChildrenOf, type StoredChild, type SubagentIncomplete } from './stored-subagents.js';

/**
 * The run of a chat session as AI SDK UI message stream chunks: one assistant UI message per
 * run, one step per model turn (`start-step` / `finish-step`), its text as one text part (a
 * reply that arrived whole, from a model that does not stream, as one delta), each tool call as
 * `tool-input-available` then its output, the finish with usage as metadata.
 *
 * A subagent's run (an agent tool's child, and its own children) shows in the same message:
 * each of its tool calls is a tool part of its own, under the id its parent shows it by
 * (`c1/p1`: call `p1` of the child that call `c1` runs), so its approval request is one the
 * page can answer; its text is the preliminary output (`preliminary: true`) of the call that
 * runs it, `{ subagent: true, text }`, replaced by the call's final output when the child ends.
 * Pure and stateful per run: the same events in give the same chunks out.
 */


/**
 * Which page a chunk is for when they differ (see ChatRun; unset: every page): `continuing`, a
 * page that continues the message it holds, with the answers it gave (the response to its
 * answer); `replaying`, a page that builds the message from the response alone (a reattach, a
 * new message).
 */
export const AUDIENCE = Symbol('audience');
export type Audience = 'continuing' | 'replaying';

/** On an approval request chunk: the question it asks (`questionOf`; a replay may leave it out once it is answered, see `withholds`). */
export const ASKS = Symbol('asks');

/** One UI message stream chunk (the `data:` of one server-sent event; symbol keys are not sent). */
export type UIChunk = { type: string; [AUDIENCE]?: Audience | undefined; [ASKS]?: string | undefined } & Record<string, unknown>;

/**
 * A question a page is asked about a call: approve it, or (`doubt`) run it again after a restart.
 * One call may be asked both (approved, then cut off while it ran): each is answered on its own.
 */
const questionOf = (kind: Answer['kind'], toolCallId: string): string => `${kind}\u0000${toolCallId}`;

/** The chunks for one audience. */
const tagged = (chunks: readonly UIChunk[], audience: Audience): UIChunk[] => chunks.map((chunk) => ({ ...chunk, [AUDIENCE]: audience }));

/**
 * Operations a page does not answer with `POST <api>/<id>/resume`, so their yields are not shown
 * as `data-operation-yielded` parts: approvals have their own answers, bound to the calls shown
 * (the page gets their approval requests), and a page does not raise its own budget (a pause ends
 * the response `paused`, with its reason).
 */
export const RESERVED_OPERATIONS: ReadonlySet<string> = new Set([APPROVALS_OPERATION, BUDGET_OPERATION]);

/** What a run's assistant message carries as metadata once the run stops. */
export interface ChatMessageMetadata {
  run: number;
  /**
   * The outcome's type (Completed, Cancelled, Failed, ...); or, for a run that goes on later,
   * `waiting` while it waits for a decision or an operation's answer, `paused` while a budget
   * paused it (until the product raises it or seals the run).
   */
  outcome: string;
  /** Why a `Sealed` run was sealed (a budget's limit, the product's `seal`), or why a `paused` one paused, for the page to show. */
  reason?: string | undefined;
  /**
   * Of a `paused` run: the subagent whose budget paused it, by the path of calls down to it (`c1`,
   * `c1/c2`); absent when the run's own budget paused it.
   */
  target?: string | undefined;
  /** The validated answer of a `Completed` run of an agent with an output schema (`outcome.output`). */
  output?: unknown;
  usage?: { inputTokens: number; outputTokens: number } | undefined;
  costUsd?: number | undefined;
}

/** A loopchart outcome as the protocol's finish reason. */
function finishReason(output: AgentOutput): string {
  const outcome = output.outcome;
  if (outcome.type === 'Completed') return outcome.finishReason ?? 'stop';
  if (outcome.type === 'Failed') return 'error';
  if (outcome.type === 'MaxTurnsExceeded') return 'length';
  return 'other';
}

/**
 * The digest an approval id shows: the call's digest bound to the chat's stored session id, so an
 * id one chat showed names nothing in another, even for the same call with the same arguments.
 */
export const chatDigest = (chat: string, digest: string): string => createHash('sha256').update(chat).update('\u0000').update(digest).digest('hex');

/**
 * The approval id a page answers with: the run, the digest of the call as shown (bound to the
 * chat) and its id, so a decision binds to that call in that run of that chat (the session
 * refuses it for any other).
 */
export const approvalIdOf = (request: Pick<ApprovalRequest, 'run' | 'digest' | 'toolCallId'>, chat: string): string =>
  `${request.run}:${chatDigest(chat, request.digest)}:${request.toolCallId}`;

/**
 * The data part that asks an AI SDK 5 page about a call (5 has no approval chunk): the stream's
 * chunk, and the part a reload shows where the stream put it (ui-messages.ts).
 */
export function approvalRequestPart(request: Pick<ApprovalRequest, 'run' | 'digest' | 'toolCallId' | 'toolName' | 'args'>, chat: string): UIChunk {
  const approvalId = approvalIdOf(request, chat);
  return { type: 'data-approval-request', id: approvalId, data: { approvalId, toolCallId: request.toolCallId, toolName: request.toolName, input: request.args } };
}

/**
 * The data part that says why the page is asked about a call in doubt (it may or may not have
 * run): the stream's chunk, and the part a reload shows where the stream put it (ui-messages.ts).
 */
export function inDoubtPart(request: Pick<ApprovalRequest, 'run' | 'digest' | 'toolCallId' | 'toolName'>, chat: string): UIChunk {
  return { type: 'data-tool-in-doubt', id: `doubt-${request.toolCallId}`, data: { toolCallId: request.toolCallId, toolName: request.toolName, approvalId: approvalIdOf(request, chat) } };
}

/** What a running subagent shows as the preliminary output of the call that runs it. */
export interface SubagentProgress {
  subagent: true;
  /** The child's text so far, its turns separated by a blank line. */
  text: string;
}

/** How often, at most, a subagent's streamed text is sent again as its call's preliminary output (its whole text each time). */
const PROGRESS_EVERY_MS = 100;

/** The run, digest and call an approval id names, or null when it is not one this handler wrote. */
export function parseApprovalId(id: string): { run: number; digest: string; toolCallId: string } | null {
  const match = /^(\d{1,9}):([0-9a-f]{64}):(.+)$/s.exec(id);
  return match ? { run: Number(match[1]), digest: match[2]!, toolCallId: match[3]! } : null;
}

export class RunChunker {
  readonly version: AiSdkVersion;
  readonly run: number;
  readonly messageId: string;
  /** The last turn a step was opened for. */
  #turn = 0;
  #stepOpen = false;
  /** The open text part's id, if any. */
  #text: string | null = null;
  /** Text parts opened so far (their ids stay unique across retries). */
  #parts = 0;
  /** The answers to this run's calls the chunker knows (the page's, the trace's): each shows with its call's result. */
  readonly #answers: Answers;
  /** Calls whose answer the log shows (see `#present`). */
  readonly #presented = new Set<string>();
  /** Calls whose approval request, and whose in-doubt part, the log has. */
  readonly #asked = new Set<string>();
  readonly #doubted = new Set<string>();
  /** Calls whose tool part the page has (`tool-input-available` sent): each is sent once. */
  readonly #inputs = new Set<string>();
  /** The calls shown, by id (what an answer's request is rebuilt from). */
  readonly #calls = new Map<string, ToolCall>();
  /** Questions answered from the page (`questionOf`): a request repeated by a resumed child is not shown again. */
  readonly #answered = new Set<string>();
  /** Questions answered, from the page or the trace (`questionOf`): what a replay on AI SDK 6 withholds. */
  readonly #decided = new Set<string>();
  /** Whether the open turn's text streamed (else its reply's text is sent whole at its end). */
  #streamed = false;
  /** Operation yields shown so far in this run: each data part has an id of its own. */
  #yields = 0;
  /** Why a budget paused the run, once it did: the response then ends `paused`. */
  #paused: string | null = null;
  /** Why a budget paused each subagent that paused (by its `target`), for a response that ends on their pauses alone. */
  readonly #childPauses = new Map<string, string>();
  /** The last `final_answer` call shown without its outcome: a rejection or the run's answer gives it one. */
  #answerCall: string | null = null;
  /** Per subagent (the id of the call that runs it): its text, where its open turn's text begins, when it was last sent. */
  readonly #children = new Map<string, ChildProgress>();

  /** The chat's stored session id, which its approval ids are bound to. */
  readonly #chat: string;

  /** `answers`: those the session's trace records for this run (a run picked up from the store). */
  constructor(version: AiSdkVersion, run: number, chat: string, answers: Answers = new Map()) {
    this.version = version;
    this.run = run;
    this.#chat = chat;
    this.messageId = `run-${run}`;
    this.#answers = answers;
    for (const [id, list] of answers) for (const { kind } of list) this.#decided.add(questionOf(kind, id));
  }

  start(): UIChunk[] {
    return [{ type: 'start', messageId: this.messageId, messageMetadata: { run: this.run, outcome: 'running' } }];
  }

  /**
   * The page answered a call (approved it, denied it, or said whether to run a call in doubt
   * again): its result shows with that answer (`callEnd`), and the chunks that show the answer
   * itself to a page that replays the run (see `#present`).
   */
  answer(toolCallId: string, answer: Answer): UIChunk[] {
    this.answered(toolCallId, answer.kind);
    this.#addAnswer(toolCallId, answer);
    return this.#present(toolCallId, answer);
  }

  #addAnswer(toolCallId: string, answer: Answer): void {
    addAnswer(this.#answers, toolCallId, answer);
    this.#decided.add(questionOf(answer.kind, toolCallId));
  }

  /**
   * Whether a replay leaves out an approval request (`question`, its `ASKS`): AI SDK 6 has no
   * chunk for the answer, so a replayed request would stay unanswered on the page (or, with its
   * result, be a part the SDK refuses). The call shows as the model read it (`callEnd`). Only the
   * question answered is left out: a call approved, then in doubt after a restart, is asked again.
   */
  withholds(question: string): boolean {
    return this.version === 6 && this.#decided.has(question);
  }

  /**
   * A call the page answered (approved or denied; `kind`: or whether to run it again): a repeat of
   * that request shows nothing. The page has its tool part and those of the calls it runs under
   * (`c1`, `c1/c2` for `c1/c2/p1`), so a run opened again from the store shows their progress and
   * outputs without announcing them again.
   */
  answered(toolCallId: string, kind: Answer['kind'] = 'approval'): void {
    this.#answered.add(questionOf(kind, toolCallId));
    for (let at = toolCallId.indexOf('/'); at > 0; at = toolCallId.indexOf('/', at + 1)) this.#inputs.add(toolCallId.slice(0, at));
    this.#inputs.add(toolCallId);
  }

  /**
   * The chunks of what a run already stored (its replies and tool results after the message that
   * started it), as a page that reattaches needs them; `turnsTaken` is the run's turn count, so
   * the next live turn opens a step of its own. `children`: the stored subagents of its calls (by
   * call ordinal), shown as the live stream showed them (see `#storedChild`).
   */
  fromMessages(messages: readonly Message[], turnsTaken: number, children: ChildrenOf = new Map()): UIChunk[] {
    const out: UIChunk[] = [];
    let ordinal = 0;
    for (const message of messages) {
      if (message.role === 'assistant') {
        out.push(...this.#step(this.#turn + 1));
        if (message.content) out.push(...this.#textDelta(message.content), ...this.#endText());
        const calls = message.toolCalls ?? [];
        for (const call of calls) out.push(...this.#toolInput(call));
        for (const call of calls) out.push(...this.#storedChild(call.id, call, children.get(ordinal++)));
      } else if (message.role === 'tool') {
        out.push(...this.#toolOutput(message, this.#calls.get(message.toolCallId)));
      }
    }
    this.#turn = Math.max(this.#turn, turnsTaken);
    return out;
  }

  /**
   * What the live stream showed of the stored child of `call` (shown as `via`) up to now: its
   * calls and their results (with the answers its trace records), its text as the call's
   * preliminary output, its own children the same way, each where the live stream put it (after
   * the calls of the turn that made them); or the marker of a child not shown whole. A child that
   * goes on live (opened again from the store) adds to it through `childEvent`.
   */
  #storedChild(via: string, call: ToolCall, child: StoredChild | undefined): UIChunk[] {
    // Read for this call (a session stored meanwhile by another process may have other calls at that place).
    if (!child || child.callId !== call.id || child.digest !== digestOf(call)) return [];
    const marker = incompleteOf(via, child);
    if (child.kind === 'incomplete') return [incompleteChunk(marker!)];
    for (const [id, answers] of child.answers) for (const answer of answers) this.#addAnswer(`${via}/${id}`, answer);
    const state = this.#childState(via);
    const out: UIChunk[] = [];
    const calls = new Map<string, ToolCall>();
    let turn = 0;
    let ordinal = 0;
    for (const message of child.messages) {
      if (message.role === 'assistant') {
        out.push(...this.#childTurn(via, state, ++turn, message, 0));
        for (const own of message.toolCalls ?? []) {
          calls.set(own.id, own);
          out.push(...this.#storedChild(`${via}/${own.id}`, own, child.children.get(ordinal++)));
        }
      } else if (message.role === 'tool') {
        const own = calls.get(message.toolCallId);
        if (own) out.push(...this.#childResult(via, own, message));
      }
    }
    return marker ? [...out, incompleteChunk(marker)] : out;
  }

  /** The chunks one emitted event adds (none for events a page does not show). */
  event(event: AgentEmitted): UIChunk[] {
    switch (event.type) {
      case 'text.delta':
        if (!event.delta) return [];
        return [...this.#step(event.turn), ...((this.#streamed = true), this.#textDelta(event.delta))];
      case 'turn.finished': {
        const step = this.#step(event.turn);
        // A model that does not stream gave its text whole: the page gets it as a streamed one would.
        const whole = !this.#streamed && event.reply.message.content ? this.#textDelta(event.reply.message.content) : [];
        return [...step, ...whole, ...this.#endText(), ...(event.reply.message.toolCalls ?? []).flatMap((call) => this.#toolInput(call))];
      }
      case 'model.retry':
        return this.#retry();
      // The answer a tripped output guardrail refused is void, as a failed attempt's text is: a
      // reattaching page must not read it again (ChatRun takes it out of the log).
      case 'guardrail.tripped':
        return this.#retry();
      case 'output.rejected':
        return this.#answerOutcome({ type: 'tool-output-error', errorText: event.error.message });
      case 'budget.paused':
        // A child run's pause (`target`) is not this run's: kept apart, for a response that ends on it (see `closing`).
        if (event.target === undefined) this.#paused = event.reason;
        else this.#childPauses.set(event.target, event.reason);
        return [];
      case 'approval.requested':
        return this.#approvalRequests(event.requests, 'approval');
      // A call cut off by a restart that may or may not have run: the page asks "run it again?" as an
      // approval (approve: run it again; deny: fail it), with a data part saying why it asks.
      // An operation yielded: the page shows what it asks (and resumes it with POST <api>/<id>/resume);
      // a subagent's (`target`, the path of calls down to it) names that child, which the resume names too.
      case 'operation.yielded': {
        if (RESERVED_OPERATIONS.has(event.operation)) return [];
        const data = { operation: event.operation, reason: event.reason, payload: event.payload, ...(event.target !== undefined && { target: event.target }) };
        return [{ type: 'data-operation-yielded', id: `yield-${this.run}-${++this.#yields}`, data }];
      }
      case 'tool.inDoubt':
        return event.requests.flatMap((request) => [...this.#inDoubt(request), ...this.#approvalRequests([request], 'doubt')]);
      case 'tool.finished':
        return this.#toolOutput(event.result, event.call);
      case 'run.finished':
        return this.#finished(event.output);
      default:
        return [];
    }
  }

  /** The content that ends a finished run: the open part and step closed, the error of a failed run. */
  #finished(output: AgentOutput): UIChunk[] {
    const outcome = output.outcome;
    const error = outcome.type === 'Failed' ? [{ type: 'error', errorText: `${outcome.error.type}: ${outcome.error.message}` }] : [];
    const answer = outcome.type === 'Completed' && outcome.output !== undefined ? this.#answerOutcome({ type: 'tool-output-available', output: outcome.output }) : [];
    return [...answer, ...this.pause(), ...error];
  }

  /** The outcome of the `final_answer` call shown last (rejected, or the run's answer), once. */
  #answerOutcome(chunk: UIChunk): UIChunk[] {
    const toolCallId = this.#answerCall;
    if (toolCallId === null) return [];
    this.#answerCall = null;
    return [{ ...chunk, toolCallId }];
  }

  /** Closes the open part and step: the run waits for a decision, or this response ends. */
  pause(): UIChunk[] {
    return [...this.#endText(), ...this.#endStep()];
  }

  /**
   * The last chunk of a response: the finished run's reason and usage, or, while the run waits
   * for someone (null), `tool-calls` with the outcome `waiting`; `paused` (with why) when a budget
   * paused the run, or when all it waits on is the budget of subagents (`pausedChildren`, their
   * targets: the first is named), which only the product raises, so the page has nothing to answer.
   */
  closing(output: AgentOutput | null, pausedChildren: readonly string[] = []): UIChunk {
    if (output === null) {
      if (this.#paused !== null) return { type: 'finish', finishReason: 'other', messageMetadata: { run: this.run, outcome: 'paused', reason: this.#paused } satisfies ChatMessageMetadata };
      const target = pausedChildren[0];
      if (target !== undefined) {
        const reason = `subagent '${target}': ${this.#childPauses.get(target) ?? 'its budget paused it'}`;
        return { type: 'finish', finishReason: 'other', messageMetadata: { run: this.run, outcome: 'paused', reason, target } satisfies ChatMessageMetadata };
      }
      return { type: 'finish', finishReason: 'tool-calls', messageMetadata: { run: this.run, outcome: 'waiting' } satisfies ChatMessageMetadata };
    }
    const outcome = output.outcome;
    const metadata: ChatMessageMetadata = {
      run: this.run,
      outcome: outcome.type,
      ...(outcome.type === 'Sealed' && { reason: outcome.reason }),
      ...(outcome.type === 'Completed' && outcome.output !== undefined && { output: outcome.output }),
      usage: output.usage,
      ...(output.costUsd !== undefined && { costUsd: output.costUsd }),
    };
    return { type: 'finish', finishReason: finishReason(output), messageMetadata: metadata };
  }

  /** A later turn closes the step before it and opens its own. */
  #step(turn: number): UIChunk[] {
    if (turn <= this.#turn) return [];
    const out = [...this.#endText(), ...this.#endStep()];
    this.#turn = turn;
    this.#stepOpen = true;
    this.#streamed = false;
    out.push({ type: 'start-step' });
    return out;
  }

  #endStep(): UIChunk[] {
    if (!this.#stepOpen) return [];
    this.#stepOpen = false;
    return [{ type: 'finish-step' }];
  }

  #textDelta(delta: string): UIChunk[] {
    const out: UIChunk[] = [];
    if (this.#text === null) {
      this.#text = `text-${this.run}-${++this.#parts}`;
      out.push({ type: 'text-start', id: this.#text });
    }
    out.push({ type: 'text-delta', id: this.#text, delta });
    return out;
  }

  #endText(): UIChunk[] {
    if (this.#text === null) return [];
    const id = this.#text;
    this.#text = null;
    return [{ type: 'text-end', id }];
  }

  /**
   * The failed attempt's text is void. AI SDK 7 takes it back (`reset-step`); 5 and 6 cannot,
   * so its part is closed and the next attempt writes a new one (a reattached page gets only what
   * the run kept, see ChatRun).
   */
  #retry(): UIChunk[] {
    this.#streamed = false;
    if (this.version === 7 && this.#stepOpen) {
      this.#text = null;
      return [{ type: 'reset-step' }];
    }
    return this.#endText();
  }

  /** The call's tool part, once: a child's call may be announced by its turn, its start and its approval request. */
  #toolInput(call: ToolCall): UIChunk[] {
    if (this.#inputs.has(call.id)) return [];
    this.#inputs.add(call.id);
    this.#calls.set(call.id, call);
    // A subagent's final answer (`c1/p1`) is its call's output, not this run's.
    if (call.name === FINAL_ANSWER_TOOL && routeOf(call.id) === null) this.#answerCall = call.id;
    return [{ type: 'tool-input-available', toolCallId: call.id, toolName: call.name, input: call.args }];
  }

  /** A request the page already answered (repeated when a child resumes) shows nothing; a child's call gets its tool part first. */
  #approvalRequests(requests: readonly ApprovalRequest[], kind: Answer['kind']): UIChunk[] {
    const out: UIChunk[] = [];
    for (const request of requests) {
      if (this.#answered.has(questionOf(kind, request.toolCallId))) continue;
      out.push(...this.#toolInput({ id: request.toolCallId, name: request.toolName, args: request.args } as ToolCall), this.#request(request, kind));
    }
    return out;
  }

  /** A call's approval request: the page answers it (approve, deny; for a call in doubt: run it again or not). */
  #request(request: Pick<ApprovalRequest, 'run' | 'digest' | 'toolCallId' | 'toolName' | 'args'>, kind: Answer['kind']): UIChunk {
    this.#asked.add(request.toolCallId);
    const question = questionOf(kind, request.toolCallId);
    // AI SDK 5 has no approval chunk: a data part the page renders and answers (README, Chat UI).
    if (this.version === 5) return { ...approvalRequestPart(request, this.#chat), [ASKS]: question };
    return { type: 'tool-approval-request', approvalId: approvalIdOf(request, this.#chat), toolCallId: request.toolCallId, [ASKS]: question };
  }

  /** Why the page is asked about a call in doubt (it may or may not have run), once. */
  #inDoubt(request: Pick<ApprovalRequest, 'run' | 'digest' | 'toolCallId' | 'toolName'>): UIChunk[] {
    if (this.#doubted.has(request.toolCallId)) return [];
    this.#doubted.add(request.toolCallId);
    return [inDoubtPart(request, this.#chat)];
  }

  /**
   * The chunks that bring a page to the call's answer, once: a page that answered has it, one
   * that replays the run has only what the log gives. A replay gets what asked the page (the
   * in-doubt part, the request) when the log lacks it (an answer the trace recorded, the run
   * picked up from the store), and on AI SDK 7 the answer itself (`tool-approval-response`, which
   * a page that answered takes as the same answer again); on 6, which cannot replay an answer,
   * no request (see `withholds`).
   */
  #present(toolCallId: string, answer: Answer): UIChunk[] {
    const call = this.#calls.get(toolCallId);
    if (this.#presented.has(toolCallId) || !call) return [];
    this.#presented.add(toolCallId);
    const request = { run: answer.run, digest: answer.digest, toolCallId, toolName: call.name, args: call.args };
    const asked: UIChunk[] = [...(answer.kind === 'doubt' ? this.#inDoubt(request) : [])];
    if (this.version !== 6 && !this.#asked.has(toolCallId)) asked.push(this.#request(request, answer.kind));
    const out = tagged(asked, 'replaying');
    if (this.version === 7) {
      const { id, approved, reason } = shownApproval(answer, approvalIdOf(request, this.#chat));
      out.push({ type: 'tool-approval-response', approvalId: id, approved, ...(reason !== undefined && { reason }) });
    }
    return out;
  }

  /**
   * What a subagent's event adds: `via` is the id of the call that runs it as the page knows it
   * (`c1`, or `c1/c2` for a grandchild). Its calls become tool parts (`<via>/<id>`); its text the
   * call's preliminary output, sent at most every PROGRESS_EVERY_MS while it streams and at each
   * turn's end. Its approval requests reach this run through its parent (see `event`).
   */
  childEvent(via: string, event: AgentEmitted, now = Date.now()): UIChunk[] {
    if (!this.#inputs.has(via)) return [];
    const child = this.#childState(via);
    switch (event.type) {
      case 'text.delta':
        if (!event.delta) return [];
        openTurn(child, event.turn);
        child.streamed = true;
        child.text += event.delta;
        return now - child.sentAt >= PROGRESS_EVERY_MS ? this.#progress(via, child, now) : [];
      case 'model.retry':
      case 'text.retracted':
        // The attempt's text is void: the next preliminary output leaves it out.
        child.text = child.text.slice(0, child.turnAt);
        child.streamed = false;
        return [];
      case 'turn.finished':
        return this.#childTurn(via, child, event.turn, event.reply.message, now);
      case 'tool.started':
        return this.#toolInput(qualified(via, event.call));
      case 'tool.finished':
        return this.#childResult(via, event.call, event.result);
      default:
        return [];
    }
  }

  #childState(via: string): ChildProgress {
    let child = this.#children.get(via);
    if (!child) this.#children.set(via, (child = { text: '', turnAt: 0, turn: 0, streamed: false, sentAt: 0 }));
    return child;
  }

  /** A child's turn ended with `reply` (its text added whole unless it streamed): its text so far as its call's output, then its calls' tool parts. */
  #childTurn(via: string, child: ChildProgress, turn: number, reply: AssistantMessage, now: number): UIChunk[] {
    openTurn(child, turn);
    if (!child.streamed && reply.content) child.text += reply.content;
    const calls = (reply.toolCalls ?? []).flatMap((call) => this.#toolInput(qualified(via, call)));
    return [...(child.text ? this.#progress(via, child, now) : []), ...calls];
  }

  /** A child's call ended: its result under the id the page shows it by. */
  #childResult(via: string, call: ToolCall, result: ToolMessage): UIChunk[] {
    return this.#inputs.has(`${via}/${call.id}`) ? this.#toolOutput({ ...result, toolCallId: `${via}/${result.toolCallId}` }, qualified(via, call)) : [];
  }

  #progress(via: string, child: { text: string; sentAt: number }, now: number): UIChunk[] {
    child.sentAt = now;
    const output: SubagentProgress = { subagent: true, text: child.text };
    return [{ type: 'tool-output-available', toolCallId: via, output, preliminary: true }];
  }

  /**
   * A call's result, as `callEnd` says a page shows it: with the answer that decided it, if the
   * page answered it (or the trace says someone did), brought to the page first (`#present`). A
   * page that replays the run may need other chunks than one that answered (AI SDK 6): each gets
   * its own.
   */
  #toolOutput(result: ToolMessage, call: ToolCall | undefined): UIChunk[] {
    // A tool of the product's own named final_answer (no output schema) answered for itself.
    if (result.toolCallId === this.#answerCall) this.#answerCall = null;
    const answer = call && claimAnswer(this.#answers, call, result);
    const approval = answer && shownApproval(answer, approvalIdOf({ run: answer.run, digest: answer.digest, toolCallId: result.toolCallId }, this.#chat));
    const ending = (to: ShownIn) => endChunk(result.toolCallId, callEnd(this.version, to, result, approval));
    const [continuing, replaying] = [ending('page'), ending('replay')];
    const presented = answer ? this.#present(result.toolCallId, answer) : [];
    if (JSON.stringify(continuing) === JSON.stringify(replaying)) return [...presented, continuing];
    return [...presented, ...tagged([continuing], 'continuing'), ...tagged([replaying], 'replaying')];
  }
}

/** What a running subagent's call shows as its preliminary output, per child (see `childEvent`). */
interface ChildProgress {
  /** Its text so far. */
  text: string;
  /** Where its open turn's text begins. */
  turnAt: number;
  turn: number;
  /** Whether the open turn's text streamed (else its reply's text is added whole at its end). */
  streamed: boolean;
  /** When its progress was last sent. */
  sentAt: number;
}

/** A child's turn `turn` begins (once): its text is set apart from the turn before by a blank line. */
function openTurn(child: ChildProgress, turn: number): void {
  if (turn === child.turn) return;
  child.turn = turn;
  child.streamed = false;
  if (child.text) child.text += '\n\n';
  child.turnAt = child.text.length;
}

/** A child's call as the page shows it: under the id of the call that runs the child (`c1/p1`). */
const qualified = (via: string, call: ToolCall): ToolCall => ({ ...call, id: `${via}/${call.id}` });

/** The data part that says a subagent's steps are not shown whole (see stored-subagents.ts). */
const incompleteChunk = (data: SubagentIncomplete): UIChunk => ({ type: 'data-subagent-incomplete', id: `subagent-${data.toolCallId}`, data });

/** The chunk that ends a call's tool part as `end` says (the approval, if any, is the page's already). */
function endChunk(toolCallId: string, end: CallEnd): UIChunk {
  if (end.state === 'output-denied') return { type: 'tool-output-denied', toolCallId };
  if (end.state === 'output-error') return { type: 'tool-output-error', toolCallId, errorText: end.errorText };
  return { type: 'tool-output-available', toolCallId, output: end.output };
}
