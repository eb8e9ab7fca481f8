/**
 * The long run: a 300-turn conversation whose tool results are large, under a small
 * window, driven through the agent machine with the pruning pass and `summarizingCompactor`.
 * Shared by `test/compaction/long-run.test.ts` (assertions) and `bench/compaction.bench.ts`
 * (the token-savings table).
 *
 * The model is a deterministic function of the request (no cursor, no turn counting): the
 * summarizer's requests are recognised by their system instructions; an agent turn reads the
 * highest step it has already asked for from the tool calls in the conversation, which survive
 * pruning (only results are pruned) and summarizing (the tail is kept verbatim and always holds the
 * latest tool-call group), and asks for the next one.
 */
import { createActor, waitFor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { type AgentEmitted, type AgentOutput } from '../../src/agent/protocol/actor-types.js';
import type { CompactionResult, Compactor } from '../../src/compaction/contract.js';
import { pruneToolResults } from '../../src/compaction/prune.js';
import { summarizingCompactor } from '../../src/compaction/summarize.js';
import type { Model, ModelReply, ModelRequest, ToolDefinition } from '../../src/model.js';
import type { Message, ToolCall } from '../../src/schemas.js';
import { estimateMessageTokens, estimateTokens } from '../../src/tokens.js';
import { defineTool } from '../../src/tools/define-tool.js';

export const SUMMARY_INSTRUCTIONS = 'SUMMARIZE: the steps whose logs were fetched, and any failure seen.';

export interface LongRunOptions {
  /** Model turns in the run: turns - 1 tool-calling turns, then the answer. Default 300. */
  turns?: number;
  contextWindow?: number;
  compactThreshold?: number;
  /** Prune line in percent of the window; `null` runs without the pruning pass. */
  pruneLine?: number | null;
  /** Recent tokens whose tool results are never pruned. */
  protectTokens?: number;
  /** Recent tokens the summarizer keeps verbatim. */
  keepTokens?: number;
}

export const LONG_RUN_DEFAULTS = {
  turns: 300,
  contextWindow: 8_000,
  compactThreshold: 80,
  pruneLine: 50,
  protectTokens: 2_000,
  keepTokens: 1_500,
} as const satisfies Required<LongRunOptions>;

export interface SentRequest {
  kind: 'agent' | 'summary';
  messages: Message[];
  tools: ToolDefinition[];
  /** estimateTokens(messages, tools): the request's size against the window. */
  tokens: number;
  /** The reply's tokens. */
  replyTokens: number;
  idempotencyKey: string;
  /** Outcome events (prune / compaction / turn) emitted before this request was sent. */
  eventsBefore: number;
}

export interface CompactionPass {
  /** The conversation handed to the compactor. */
  messages: Message[];
  /** Tool results pruneToolResults would still replace in it (0: pruning had nothing left). */
  prunableLeft: number;
  /** estimateTokens of the conversation before and of what the compactor returned (no tools). */
  tokensBefore: number;
  tokensAfter: number | null;
  /** Outcome events emitted before the pass started. */
  eventsBefore: number;
}

export interface LongRunRecord {
  options: Required<Omit<LongRunOptions, 'pruneLine'>> & { pruneLine: number | null };
  output: AgentOutput;
  /** prune.finished, compaction.finished and turn.finished, in emission order. */
  events: AgentEmitted[];
  requests: SentRequest[];
  compactions: CompactionPass[];
  /** The biggest tool result the run produced, in tokens. */
  largestToolResult: number;
  elapsedMs: number;
}

/** ~30 tokens per line; 10 to 50 lines, so a result is roughly 300 to 1,500 tokens. */
export function logOutput(step: number, part = 0): string {
  const lines = 10 + ((step * 37 + part * 11) % 41);
  let out = '';
  for (let i = 0; i < lines; i++) {
    out += `2024-03-01T10:${String((step + i) % 60).padStart(2, '0')}:00Z INFO step=${step} worker-${(i + part) % 7} batch ${step * 1000 + i} rows=${(step * 31 + i * 17) % 997} ok\n`;
  }
  return out;
}

const fetchLog = defineTool({
  name: 'fetch_log',
  description: 'Fetches the log of one step of the batch job (and one part of it, for split steps).',
  input: z.object({ step: z.number().int().positive(), part: z.number().int().positive().optional() }),
  execute: ({ step, part }) => logOutput(step, part),
});

/** The highest step the conversation has asked for (0 before the first call). */
function lastStep(messages: readonly Message[]): number {
  let step = 0;
  for (const message of messages) {
    if (message.role !== 'assistant') continue;
    for (const call of message.toolCalls ?? []) {
      const asked = (call.args as { step?: unknown }).step;
      if (call.name === 'fetch_log' && typeof asked === 'number' && asked > step) step = asked;
    }
  }
  return step;
}

/** Every tenth step fetches its log in two parts, in parallel: tool-call groups of two. */
function agentReply(request: ModelRequest, turns: number): ModelReply['message'] {
  const step = lastStep(request.messages) + 1;
  if (step >= turns) {
    return { role: 'assistant', content: `All ${step - 1} logs are fetched and checked: no step failed.` };
  }
  const calls: ToolCall[] =
    step % 10 === 0
      ? [1, 2].map((part) => ({ id: `call_${step}_${part}`, name: 'fetch_log', args: { step, part } }))
      : [{ id: `call_${step}`, name: 'fetch_log', args: { step } }];
  return { role: 'assistant', content: `Fetching the log of step ${step}.`, toolCalls: calls };
}

/** A short summary built from the transcript: the range of steps it covers. */
function summaryReply(request: ModelRequest): ModelReply['message'] {
  const transcript = request.messages.map((m) => m.content).join('\n');
  const steps = [...transcript.matchAll(/fetch_log\(\{"step":(\d+)|steps (\d+) to (\d+)/g)].flatMap((m) =>
    m.slice(1).filter((s) => s !== undefined).map(Number),
  );
  const from = Math.min(...steps);
  const to = Math.max(...steps);
  return {
    role: 'assistant',
    content: steps.length ? `Fetched and checked the logs of steps ${from} to ${to}; every batch reported ok.` : 'Nothing done yet.',
  };
}

export async function runLongConversation(options: LongRunOptions = {}): Promise<LongRunRecord> {
  const o = { ...LONG_RUN_DEFAULTS, ...options };
  const events: AgentEmitted[] = [];
  const requests: SentRequest[] = [];
  const compactions: CompactionPass[] = [];

  const model: Model = {
    name: 'long-run',
    async generate(request) {
      const summary = request.messages[0]?.role === 'system' && request.messages[0].content === SUMMARY_INSTRUCTIONS;
      const message = summary ? summaryReply(request) : agentReply(request, o.turns);
      // What a provider reports: the request's input tokens and the reply's.
      const usage = { inputTokens: estimateTokens(request.messages, request.tools), outputTokens: estimateMessageTokens(message) };
      requests.push({
        kind: summary ? 'summary' : 'agent',
        messages: [...request.messages],
        tools: [...request.tools],
        tokens: usage.inputTokens,
        replyTokens: usage.outputTokens,
        idempotencyKey: request.idempotencyKey,
        eventsBefore: events.length,
      });
      return { message, finishReason: message.toolCalls ? 'tool-calls' : 'stop', usage };
    },
  };

  const summarize = summarizingCompactor({ keepTokens: o.keepTokens, instructions: SUMMARY_INSTRUCTIONS });
  const compactor: Compactor = async (request) => {
    const pass: CompactionPass = {
      messages: [...request.messages],
      prunableLeft: pruneToolResults(request.messages, { protectTokens: o.protectTokens }).pruned,
      tokensBefore: estimateTokens(request.messages),
      tokensAfter: null,
      eventsBefore: events.length,
    };
    compactions.push(pass);
    const result: CompactionResult = await summarize(request);
    pass.tokensAfter = result && estimateTokens(result.messages);
    return result;
  };

  const machine = createAgentMachine({
    model,
    tools: [fetchLog],
    compactor,
    retry: false,
    ...(o.pruneLine === null ? {} : { pruning: { threshold: o.pruneLine, protectTokens: o.protectTokens } }),
    policy: { contextWindow: o.contextWindow, compactThreshold: o.compactThreshold, maxTurns: o.turns + 10 },
  });
  const actor = createActor(machine, {
    input: {
      sessionId: 'long-run',
      history: [{ role: 'system', content: 'You check the logs of a batch job, one step at a time, with fetch_log.' }],
      prompt: `Fetch and check the log of every step from 1 to ${o.turns - 1}, then report.`,
    },
  });
  for (const type of ['prune.finished', 'compaction.finished', 'turn.finished'] as const) {
    actor.on(type, (event) => void events.push(event));
  }
  const started = performance.now();
  actor.start();
  const snapshot = await waitFor(actor, (s) => s.status !== 'active', { timeout: 120_000 });
  const elapsedMs = performance.now() - started;
  if (snapshot.status !== 'done') throw new Error(`the long run ended with status ${snapshot.status}: ${String(snapshot.error)}`);

  let largestToolResult = 0;
  for (let step = 1; step < o.turns; step++) {
    for (const part of step % 10 === 0 ? [1, 2] : [undefined]) {
      largestToolResult = Math.max(largestToolResult, estimateMessageTokens({ role: 'tool', toolCallId: 'x', toolName: 'fetch_log', content: logOutput(step, part) }));
    }
  }
  return { options: o, output: snapshot.output!, events, requests, compactions, largestToolResult, elapsedMs };
}

export interface LongRunFigures {
  turns: number;
  prunePasses: number;
  /** Tool results replaced by a marker over the run. */
  resultsPruned: number;
  tokensSavedByPruning: number;
  compactionPasses: number;
  /** Passes that rewrote the conversation (the others returned null). */
  summaries: number;
  tokensSavedBySummarizing: number;
  /** Input + output tokens of the summarizer's own requests: what summarizing costs. */
  summaryCallTokens: number;
  /** Input tokens of all agent requests over the run. */
  agentInputTokens: number;
  largestRequest: number;
}

export function figuresOf(record: LongRunRecord): LongRunFigures {
  const prunes = record.events.filter((e) => e.type === 'prune.finished');
  const agent = record.requests.filter((r) => r.kind === 'agent');
  const summary = record.requests.filter((r) => r.kind === 'summary');
  const rewritten = record.compactions.filter((c) => c.tokensAfter !== null);
  return {
    turns: record.events.filter((e) => e.type === 'turn.finished').length,
    prunePasses: prunes.length,
    resultsPruned: prunes.reduce((n, e) => n + e.pruned, 0),
    tokensSavedByPruning: prunes.reduce((n, e) => n + e.tokensSaved, 0),
    compactionPasses: record.compactions.length,
    summaries: rewritten.length,
    tokensSavedBySummarizing: rewritten.reduce((n, c) => n + c.tokensBefore - c.tokensAfter!, 0),
    summaryCallTokens: summary.reduce((n, r) => n + r.tokens + r.replyTokens, 0),
    agentInputTokens: agent.reduce((n, r) => n + r.tokens, 0),
    largestRequest: Math.max(...record.requests.map((r) => r.tokens)),
  };
}
