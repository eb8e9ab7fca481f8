import type { AgentContext } from '../agent/core/context.js';
import type { Message, Outcome } from '../schemas.js';
import { escapeLine, escapeText } from './escape.js';
import { cliHint } from './hint.js';

/** How much of a tool result (or of a call's arguments) `show` prints unless asked for all. */
export const PREVIEW_CHARS = 200;

export interface TranscriptOptions {
  /** Print tool results and arguments in full. */
  full?: boolean;
}

const ROLE_WIDTH = 'assistant'.length;

/** What a cut may leave at the end: part of an escape `escapeLine` wrote (`\x9`, `\u20`), or the first half of a surrogate pair. */
const PARTIAL_END = /\\(?:x[0-9a-f]?|u[0-9a-f]{0,3})?$|[\ud800-\udbff]$/;

/** One line of at most `max` characters: newlines shown as ⏎, controls escaped, the rest cut with its length. */
export function preview(text: string, max: number | undefined): string {
  const line = escapeLine(text.replace(/\r?\n/g, '⏎'));
  if (max === undefined || line.length <= max) return line;
  return `${line.slice(0, max).replace(PARTIAL_END, '')}… [${text.length} chars]`;
}

const indentRest = (text: string, indent: string) => text.replace(/\n/g, `\n${indent}`);

/** A message as `show` prints it: its position, role, text, the calls it makes, a result's source. */
export function formatMessage(message: Message, position: number, options: TranscriptOptions = {}): string {
  const max = options.full ? undefined : PREVIEW_CHARS;
  const head = `${String(position).padStart(4)}  ${message.role.padEnd(ROLE_WIDTH)}  `;
  const indent = ' '.repeat(head.length);
  switch (message.role) {
    case 'tool': {
      const flag = message.isError ? ' (error)' : '';
      return `${head}${escapeLine(message.toolName)} [${escapeLine(message.toolCallId)}]${flag}: ${preview(message.content, max)}`;
    }
    case 'assistant': {
      const lines = [`${head}${message.content === '' ? '(no text)' : indentRest(escapeText(message.content), indent)}`];
      for (const call of message.toolCalls ?? []) {
        lines.push(`${indent}→ ${escapeLine(call.name)} ${preview(JSON.stringify(call.args) ?? 'undefined', max)} [${escapeLine(call.id)}]`);
      }
      return lines.join('\n');
    }
    default:
      return `${head}${indentRest(escapeText(message.content), indent)}`;
  }
}

export function describeOutcome(outcome: Outcome, max = PREVIEW_CHARS): string {
  switch (outcome.type) {
    case 'Completed':
      return `Completed: ${preview(outcome.finalText, max)}`;
    case 'Sealed':
      return `Sealed: ${escapeLine(outcome.reason)}`;
    case 'Failed':
      return `Failed: ${escapeLine(outcome.error.type)}: ${escapeLine(outcome.error.message)}`;
    default:
      return outcome.type;
  }
}

/** What the session is doing, in one line: at rest (and how its last run ended) or mid-run. */
export function describeState(context: AgentContext, inFlight: boolean): string {
  const brain = context.brain;
  // With handoffs: who has the conversation.
  const agent = context.agent ? `; with agent ${escapeLine(context.agent.name)} (handed over by ${escapeLine(context.agent.from)})` : '';
  if (!inFlight) {
    const last = context.lastRun ? `last run (${context.runIndex}) ${describeOutcome(context.lastRun.outcome, 80)}` : 'no run yet';
    return `at rest; ${last}${agent}`;
  }
  const waiting = context.approvals.waiting.filter((id) => !Object.hasOwn(context.approvals.decisions, id));
  const parts = [`run ${context.runIndex} in flight: ${brain.value} after ${brain.context.turnsTaken} turn(s)`];
  if (brain.value === 'AwaitingTools') parts.push(`${brain.context.pendingTools.length} tool call(s) pending`);
  if (waiting.length > 0) parts.push(`waiting for approval of ${waiting.map(escapeLine).join(', ')}`);
  const inDoubt = context.doubt?.waiting ?? [];
  if (inDoubt.length > 0) parts.push(`in doubt after a restart (started, no result): ${inDoubt.map(escapeLine).join(', ')} (${cliHint('sessions doubt')})`);
  return parts.join('; ') + agent;
}

/** The operations' state as `show` prints it: each slice (as JSON), and the operation a run waits on. */
export function describeOperations(context: AgentContext, options: TranscriptOptions = {}): string[] {
  const max = options.full ? undefined : PREVIEW_CHARS;
  const { slices, waiting } = context.operations;
  const lines = Object.entries(slices).map(([name, slice]) => `operation ${escapeLine(name)}: ${preview(JSON.stringify(slice), max)}`);
  if (waiting) {
    lines.push(`waiting on operation ${escapeLine(waiting.operation)}: ${escapeLine(waiting.reason)} ${preview(JSON.stringify(waiting.payload), max)}`);
  }
  return lines;
}

/** The whole transcript: committed history, then the pending messages of a run in flight. */
export function formatTranscript(context: AgentContext, options: TranscriptOptions = {}): string {
  const { history, pending } = context.brain.context;
  const lines = history.map((message, i) => formatMessage(message, i, options));
  if (pending.length > 0) {
    lines.push('      -- run in flight: not committed yet --');
    pending.forEach((message, i) => lines.push(formatMessage(message, history.length + i, options)));
  }
  return lines.join('\n');
}
