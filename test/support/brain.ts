/**
 * Test helpers for the brain (LoopMachine): message builders, reference coherence checks,
 * machines parked in every state, and assertions for illegal / invalid feeds.
 */
import { expect } from 'vitest';
import { LoopMachine } from '../../src/brain/loop-machine.js';
import { IllegalFeedError, InvalidFeedError } from '../../src/errors.js';
import type {
  AssistantMessage,
  Message,
  StateName,
  ToolCall,
  ToolMessage,
  UserMessage,
} from '../../src/schemas.js';

// ---------------------------------------------------------------- message builders

export const user = (content = 'hi'): UserMessage => ({ role: 'user', content });
export const sys = (content = 'you are helpful'): Message => ({ role: 'system', content });
export const call = (id: string, name = 'read', args: unknown = {}): ToolCall => ({ id, name, args });
export const asst = (content = '', toolCalls?: ToolCall[]): AssistantMessage =>
  toolCalls === undefined ? { role: 'assistant', content } : { role: 'assistant', content, toolCalls };
export const toolMsg = (toolCallId: string, toolName = 'read', content = 'ok', isError?: boolean): ToolMessage =>
  isError === undefined
    ? { role: 'tool', toolCallId, toolName, content }
    : { role: 'tool', toolCallId, toolName, content, isError };
/** The exact pre-answer the brain gives a call to a tool the driver did not advertise. */
export const notAvailable = (toolCallId: string, toolName: string): ToolMessage => ({
  role: 'tool',
  toolCallId,
  toolName,
  content: `tool '${toolName}' is not available`,
  isError: true,
});

/** Answers for every call of an assistant message, in call order. */
export const answersFor = (m: AssistantMessage, content = 'ok'): ToolMessage[] =>
  (m.toolCalls ?? []).map((c) => toolMsg(c.id, c.name, content));

// ---------------------------------------------------------------- reference checks

const callIds = (m: Message): string[] => (m.role === 'assistant' ? (m.toolCalls ?? []).map((c) => c.id) : []);

/**
 * Reference implementation of coherentCut: the largest i <= min(limit, length) such that every assistant
 * tool call in messages[0,i) is answered by a tool result that follows it in messages[0,i).
 * (A result answers one open call with its id; a result that answers nothing is ignored.)
 */
export function refCoherentCut(messages: readonly Message[], limit: number): number {
  const end = Math.min(limit, messages.length);
  const open = new Map<string, number>();
  let openCount = 0;
  let cut = 0;
  for (let i = 0; i < end; i++) {
    const m = messages[i]!;
    for (const id of callIds(m)) {
      open.set(id, (open.get(id) ?? 0) + 1);
      openCount++;
    }
    if (m.role === 'tool' && (open.get(m.toolCallId) ?? 0) > 0) {
      open.set(m.toolCallId, open.get(m.toolCallId)! - 1);
      openCount--;
    }
    if (openCount === 0) cut = i + 1;
  }
  return cut;
}

/** True when every assistant tool call is answered by a later tool result. */
export const allCallsAnswered = (messages: readonly Message[]): boolean =>
  refCoherentCut(messages, Infinity) === messages.length;

/**
 * What a provider accepts: every assistant message with tool calls is followed immediately by exactly
 * one result per call (no more, no less, any order), and no tool result appears anywhere else.
 */
export function providerValid(messages: readonly Message[]): boolean {
  let i = 0;
  while (i < messages.length) {
    const m = messages[i]!;
    if (m.role === 'tool') return false; // orphan result
    i++;
    const ids = callIds(m);
    if (ids.length === 0) continue;
    const want = new Set(ids);
    if (want.size !== ids.length) return false;
    for (let k = 0; k < ids.length; k++, i++) {
      const r = messages[i];
      if (r === undefined || r.role !== 'tool' || !want.has(r.toolCallId)) return false;
      want.delete(r.toolCallId);
    }
  }
  return true;
}

// ---------------------------------------------------------------- machines in every state

/** A deep, JSON-level copy of the machine's persisted form. */
export const snap = (m: LoopMachine): unknown => JSON.parse(JSON.stringify(m.toJSON()));

/** A machine restored from a fresh machine's snapshot with some context fields overridden. */
export function machineWith(overrides: Record<string, unknown>): LoopMachine {
  return LoopMachine.restore({ ...(snap(new LoopMachine()) as object), ...overrides });
}

/** Start, with a user message in pending. */
export function inStart(): LoopMachine {
  const m = new LoopMachine({ history: [sys()] });
  m.acceptInput(user('hello'));
  return m;
}

/** AwaitingModel (turn 1). */
export function inAwaitingModel(): LoopMachine {
  const m = inStart();
  expect(m.nextStep()).toEqual({ type: 'CallLLM', turn: 1 });
  return m;
}

export const toolReply = asst('let me look', [call('c1', 'read', { path: 'a' })]);

/** AwaitingTools (turn 1), one known call `c1` to `read`. */
export function inAwaitingTools(): LoopMachine {
  const m = inAwaitingModel();
  m.modelResponse(toolReply, 100, ['read']);
  expect(m.state().type).toBe('AwaitingTools');
  return m;
}

/** AwaitingCompaction for the given reason (window 1000, threshold 80). */
export function inAwaitingCompaction(reason: 'Emergency' | 'ThresholdExceeded' = 'Emergency'): LoopMachine {
  const m = inStart();
  m.setContextTokens(reason === 'Emergency' ? 960 : 850);
  expect(m.nextStep({ contextWindow: 1000 })).toEqual({ type: 'Compact', reason });
  return m;
}

/** Terminal(Completed{finalText: 'done'}). */
export function inTerminal(): LoopMachine {
  const m = inAwaitingModel();
  m.modelResponse(asst('done'), 50, []);
  expect(m.state()).toEqual({ type: 'Terminal', outcome: { type: 'Completed', finalText: 'done' } });
  return m;
}

export const ALL_STATES: Record<StateName, () => LoopMachine> = {
  Start: inStart,
  AwaitingModel: inAwaitingModel,
  AwaitingTools: inAwaitingTools,
  AwaitingCompaction: () => inAwaitingCompaction('Emergency'),
  Terminal: inTerminal,
};
export const STATE_NAMES = Object.keys(ALL_STATES) as StateName[];
export const NON_TERMINAL: StateName[] = ['Start', 'AwaitingModel', 'AwaitingTools', 'AwaitingCompaction'];

// ---------------------------------------------------------------- feed assertions

function caught(fn: () => unknown): unknown {
  try {
    fn();
  } catch (e) {
    return e;
  }
  return undefined;
}

/** The feed throws IllegalFeedError naming feed and state, and the machine is unchanged and healthy. */
export function expectIllegal(m: LoopMachine, feed: string, state: StateName, fn: () => unknown): IllegalFeedError {
  const before = snap(m);
  const err = caught(fn);
  expect(err, `${feed} in ${state} should throw`).toBeInstanceOf(IllegalFeedError);
  const e = err as IllegalFeedError;
  expect(e.feed).toBe(feed);
  expect(e.state).toBe(state);
  expect(snap(m)).toEqual(before);
  expect(m.actor.getSnapshot().status).not.toBe('error');
  return e;
}

/** The feed throws InvalidFeedError naming the feed, and the machine is unchanged and healthy. */
export function expectInvalid(m: LoopMachine, feed: string, fn: () => unknown): InvalidFeedError {
  const before = snap(m);
  const err = caught(fn);
  expect(err, `${feed} should reject its payload`).toBeInstanceOf(InvalidFeedError);
  const e = err as InvalidFeedError;
  expect(e.feed).toBe(feed);
  expect(snap(m)).toEqual(before);
  expect(m.actor.getSnapshot().status).not.toBe('error');
  return e;
}

/** The context field of the machine's persisted form (typed loosely for assertions). */
export const ctx = (m: LoopMachine): Record<string, unknown> => m.toJSON() as unknown as Record<string, unknown>;
