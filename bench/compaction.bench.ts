/**
 * Tokens saved by pruning vs. by summarizing on the issue's long run (test/support/long-run.ts):
 * 300 turns, tool results of 300 to 1,500 tokens, an 8,000-token window, compactThreshold 80 %,
 * through the agent machine with `summarizingCompactor` (keepTokens 1,500). Two configurations:
 * the prune line at 50 % (protecting the last 2,000 tokens) before summarizing, and summarizing
 * alone. Token figures are o200k estimates of the messages (tool definitions excluded):
 * - saved by pruning: the markers' savings, summed over every prune pass;
 * - saved by summarizing: conversation before the pass minus what the compactor returned, summed;
 * - summary calls: input + output tokens of the summarizer's own model requests (its price);
 * - agent input: input tokens of the 300 agent requests (tools included).
 * Deterministic: the same numbers on every machine; only the wall time varies.
 */
import { pathToFileURL } from 'node:url';
import { figuresOf, LONG_RUN_DEFAULTS, runLongConversation, type LongRunFigures } from '../test/support/long-run.js';
import { printTable } from './support.js';

export async function run(): Promise<void> {
  const configs = [
    { label: `prune ${LONG_RUN_DEFAULTS.pruneLine}% + summarize`, pruneLine: LONG_RUN_DEFAULTS.pruneLine },
    { label: 'summarize only', pruneLine: null },
  ] as const;
  const results: { figures: LongRunFigures; ms: number; outcome: string }[] = [];
  for (const config of configs) {
    const record = await runLongConversation({ pruneLine: config.pruneLine });
    results.push({ figures: figuresOf(record), ms: record.elapsedMs, outcome: record.output.outcome.type });
  }
  const row = (label: string, pick: (f: LongRunFigures) => number) => [label, ...results.map((r) => pick(r.figures))];
  const { turns, contextWindow, compactThreshold } = LONG_RUN_DEFAULTS;
  printTable(
    `Compaction on a ${turns}-turn run, window ${contextWindow.toLocaleString('en-US')}, compactThreshold ${compactThreshold}% (tokens, o200k estimates)`,
    ['', ...configs.map((c) => c.label)],
    [
      ['outcome', ...results.map((r) => r.outcome)],
      row('model turns', (f) => f.turns),
      row('prune passes', (f) => f.prunePasses),
      row('tool results pruned', (f) => f.resultsPruned),
      row('tokens saved by pruning', (f) => f.tokensSavedByPruning),
      row('summary passes', (f) => f.summaries),
      row('tokens saved by summarizing', (f) => f.tokensSavedBySummarizing),
      row('summary calls (in + out)', (f) => f.summaryCallTokens),
      row('agent input tokens', (f) => f.agentInputTokens),
      row('largest request', (f) => f.largestRequest),
      ['wall time (ms)', ...results.map((r) => r.ms)],
    ],
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await run();
