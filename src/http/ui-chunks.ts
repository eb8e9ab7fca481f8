import type { AgentEmitted, AgentOutput } from '../../machines/agent.machine.js';
import type { ApprovalRequest } from '../agent/approval-binding.js';
import type { Message, ToolCall, ToolMessage } from '../schemas.js';

/**
 * The run of a chat session as AI SDK UI message stream chunks: one assistant UI message per
 * run, one step per model turn (`start-step` / `finish-step`), its text as one text part, each
 * tool call as `tool-input-available` then its output, the finish with usage as metadata.
 * Pure and stateful per run: the same events in give the same chunks out.
 */

/** The AI SDK major version whose protocol a page speaks (its `useChat` reads the stream). */
export type AiSdkVersion = 5 | 6 | 7;

/** One UI message stream chunk (the `data:` of one server-sent event). */
export type UIChunk = { type: string } & Record<string, unknown>;

/** What a run's assistant message carries as metadata once the run stops. */
export interface ChatMessageMetadata {
  run: number;
  /** The outcome's type (Completed, Cancelled, Failed, ...), or `waiting` while a run waits for a decision. */
  outcome: string;
  usage?: { inputTokens: number; outputTokens: number };
  costUsd?: number;
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
 * The approval id a page answers with: the run, the digest of the call as shown and its id, so a
 * decision binds to that call in that run (the session refuses it for any other).
 */
export const approvalIdOf = (request: Pick<ApprovalRequest, 'run' | 'digest' | 'toolCallId'>): string => `${request.run}:${request.digest}:${request.toolCallId}`;

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
  readonly #denied = new Set<string>();

  constructor(version: AiSdkVersion, run: number) {
    this.version = version;
    this.run = run;
    this.messageId = `run-${run}`;
  }

  start(): UIChunk[] {
    return [{ type: 'start', messageId: this.messageId, messageMetadata: { run: this.run, outcome: 'running' } }];
  }

  /** A call the page denied: its result is shown as denied, not as a tool error. */
  denied(toolCallId: string): void {
    this.#denied.add(toolCallId);
  }

  /**
   * The chunks of what a run already stored (its replies and tool results after the message that
   * started it), as a page that reattaches needs them; `turnsTaken` is the run's turn count, so
   * the next live turn opens a step of its own.
   */
  fromMessages(messages: readonly Message[], turnsTaken: number): UIChunk[] {
    const out: UIChunk[] = [];
    for (const message of messages) {
      if (message.role === 'assistant') {
        out.push(...this.#step(this.#turn + 1));
        if (message.content) out.push(...this.#textDelta(message.content), ...this.#endText());
        for (const call of message.toolCalls ?? []) out.push(this.#toolInput(call));
      } else if (message.role === 'tool') {
        out.push(this.#toolOutput(message));
      }
    }
    this.#turn = Math.max(this.#turn, turnsTaken);
    return out;
  }

  /** The chunks one emitted event adds (none for events a page does not show). */
  event(event: AgentEmitted): UIChunk[] {
    switch (event.type) {
      case 'text.delta':
        return event.delta ? [...this.#step(event.turn), ...this.#textDelta(event.delta)] : [];
      case 'turn.finished':
        return [...this.#step(event.turn), ...this.#endText(), ...(event.reply.message.toolCalls ?? []).map((call) => this.#toolInput(call))];
      case 'model.retry':
        return this.#retry();
      case 'approval.requested':
        return this.#approvalRequests(event.requests);
      case 'tool.finished':
        return [this.#toolOutput(event.result)];
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
    return [...this.pause(), ...error];
  }

  /** Closes the open part and step: the run waits for a decision, or this response ends. */
  pause(): UIChunk[] {
    return [...this.#endText(), ...this.#endStep()];
  }

  /**
   * The last chunk of a response: the finished run's reason and usage, or, while the run waits
   * for a decision (null), `tool-calls` with the outcome `waiting`.
   */
  closing(output: AgentOutput | null): UIChunk {
    if (output === null) return { type: 'finish', finishReason: 'tool-calls', messageMetadata: { run: this.run, outcome: 'waiting' } satisfies ChatMessageMetadata };
    const metadata: ChatMessageMetadata = {
      run: this.run,
      outcome: output.outcome.type,
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
    if (this.version === 7 && this.#stepOpen) {
      this.#text = null;
      return [{ type: 'reset-step' }];
    }
    return this.#endText();
  }

  #toolInput(call: ToolCall): UIChunk {
    return { type: 'tool-input-available', toolCallId: call.id, toolName: call.name, input: call.args };
  }

  #approvalRequests(requests: readonly ApprovalRequest[]): UIChunk[] {
    if (this.version === 5) {
      // AI SDK 5 has no approval chunk: a data part the page renders and answers (README, Chat UI).
      return requests.map((request) => ({
        type: 'data-approval-request',
        id: approvalIdOf(request),
        data: { approvalId: approvalIdOf(request), toolCallId: request.toolCallId, toolName: request.toolName, input: request.args },
      }));
    }
    return requests.map((request) => ({ type: 'tool-approval-request', approvalId: approvalIdOf(request), toolCallId: request.toolCallId }));
  }

  #toolOutput(result: ToolMessage): UIChunk {
    if (this.#denied.has(result.toolCallId) && this.version !== 5) return { type: 'tool-output-denied', toolCallId: result.toolCallId };
    if (result.isError) return { type: 'tool-output-error', toolCallId: result.toolCallId, errorText: result.content };
    return { type: 'tool-output-available', toolCallId: result.toolCallId, output: result.content };
  }
}
