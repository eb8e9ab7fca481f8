/**
 * The long run: 300 turns, tool results of 300 to 1,500 tokens, an 8,000-token window, the
 * prune line at 50 %, compactThreshold 80 %, pruning + summarizingCompactor, through the agent
 * machine. Pruning comes first, the run completes, every request is provider-valid and fits.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { toWireMessages, toWireTools } from '../../src/models/openai-wire.js';
import { providerValid } from '../support/brain.js';
import { checkChatRequest } from '../support/chat-server.js';
import { figuresOf, LONG_RUN_DEFAULTS, runLongConversation, type LongRunRecord } from '../support/long-run.js';

const { contextWindow, compactThreshold, pruneLine } = LONG_RUN_DEFAULTS;
let run: LongRunRecord;

beforeAll(async () => {
  run = await runLongConversation();
  const f = figuresOf(run);
  console.log(
    `long run: ${f.turns} turns in ${run.elapsedMs.toFixed(0)} ms; pruning ${f.prunePasses} passes, ${f.resultsPruned} results, ` +
      `${f.tokensSavedByPruning} tokens saved; summarizing ${f.summaries} passes, ${f.tokensSavedBySummarizing} tokens saved ` +
      `(summary calls ${f.summaryCallTokens} tokens); largest request ${f.largestRequest} of ${contextWindow}`,
  );
}, 120_000);

describe('a 300-turn run with large tool results under a small window', () => {
  it('completes: 300 model turns, the final answer, a coherent committed conversation', () => {
    expect(run.output.outcome).toEqual({ type: 'Completed', finalText: 'All 299 logs are fetched and checked: no step failed.' });
    expect(run.events.filter((e) => e.type === 'turn.finished')).toHaveLength(300);
    expect(run.requests.filter((r) => r.kind === 'agent')).toHaveLength(300);
    expect(providerValid(run.output.messages)).toBe(true);
    // Tool results really are large against the window: five of them would cross the prune line.
    expect(run.largestToolResult).toBeGreaterThan(1_400);
  });

  it('prunes before it summarizes, and summarizes only when pruning has nothing left or cannot get under the threshold', () => {
    const firstPrune = run.events.findIndex((e) => e.type === 'prune.finished');
    const firstCompaction = run.events.findIndex((e) => e.type === 'compaction.finished');
    expect(firstPrune).toBeGreaterThanOrEqual(0);
    expect(firstCompaction).toBeGreaterThan(firstPrune);
    expect(run.compactions.length).toBeGreaterThanOrEqual(2);
    expect(run.compactions[0]!.eventsBefore).toBeGreaterThan(firstPrune);

    for (const pass of run.compactions) {
      // Nothing left that pruning would replace in what the compactor was handed.
      expect(pass.prunableLeft).toBe(0);
      // When a prune ran right before, it could not bring the estimate under the compaction line.
      const previous = run.events[pass.eventsBefore - 1]!;
      if (previous.type === 'prune.finished') expect(previous.after * 100).toBeGreaterThan(contextWindow * compactThreshold);
    }
    // Every prune pass started above the prune line and saved something.
    for (const e of run.events) {
      if (e.type !== 'prune.finished') continue;
      expect(e.before * 100).toBeGreaterThan(contextWindow * pruneLine);
      expect(e.pruned).toBeGreaterThan(0);
      expect(e.after).toBe(e.before - e.tokensSaved);
    }
    // Every compaction was a threshold pass that rewrote the conversation and made progress.
    for (const e of run.events) {
      if (e.type !== 'compaction.finished') continue;
      expect(e).toMatchObject({ reason: 'ThresholdExceeded', rewritten: true });
      expect(e.after).toBeLessThan(e.before);
    }
  });

  it('every request the model received is provider-valid: each tool call answered, no orphan result', () => {
    for (const [i, request] of run.requests.entries()) {
      expect(providerValid(request.messages), `request ${i} (${request.kind})`).toBe(true);
      const body = {
        model: 'test-model',
        messages: toWireMessages(request.messages),
        ...(request.tools.length > 0 ? { tools: toWireTools(request.tools) } : {}),
      };
      expect(checkChatRequest(body), `request ${i} (${request.kind})`).toEqual([]);
    }
    const summaries = run.requests.filter((r) => r.kind === 'summary');
    expect(summaries).toHaveLength(run.compactions.length);
    for (const s of summaries) expect(s.tools).toEqual([]);
    // Each summary pass is a distinct request to an idempotent provider.
    expect(new Set(summaries.map((s) => s.idempotencyKey)).size).toBe(summaries.length);
  });

  it('never exceeds the window: every request, summaries included, is estimated at or below contextWindow', () => {
    for (const [i, request] of run.requests.entries()) {
      expect(request.tokens, `request ${i} (${request.kind})`).toBeLessThanOrEqual(contextWindow);
    }
    // Agent requests also stay clear of the emergency line: pruning and summarizing kept up.
    const agent = run.requests.filter((r) => r.kind === 'agent');
    expect(Math.max(...agent.map((r) => r.tokens)) * 100).toBeLessThan(contextWindow * 95);
  });
});
