/**
 * Issue 10, bug 15, driver side: a summary that comes back empty (after its retries) or cut short
 * is a compaction that changed nothing. The brain's stall rule decides: a threshold pass that
 * still fits below the emergency line defers and the run goes on; at the emergency line the run
 * fails with CompactionStalled. Never a silent loss of the summarized turns.
 */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { summarizingCompactor } from '../../../src/compaction/summarize.js';
import type { Model, ModelReply } from '../../../src/model.js';
import type { Message } from '../../../src/schemas.js';
import { runToCompletion } from '../../support/driver.js';

const long = (n: number) => Array.from({ length: n }, (_, i) => `word${i}`).join(' ');
const history: Message[] = [
  { role: 'user', content: 'the task' },
  { role: 'assistant', content: long(300) },
  { role: 'user', content: 'more' },
  { role: 'assistant', content: long(300) },
];

/** Answers the agent with `answer`; asked for a summary, answers with nothing (or a cut one). */
function model(summary: 'empty' | 'truncated', inputTokens: number): Model {
  return {
    name: 'm',
    async generate({ messages }): Promise<ModelReply> {
      const asksSummary = messages.some((m) => m.role === 'system' && m.content.startsWith('Summarize'));
      if (asksSummary) return { message: { role: 'assistant', content: summary === 'empty' ? '  ' : 'half a sum' }, finishReason: summary === 'empty' ? 'stop' : 'length' };
      return { message: { role: 'assistant', content: 'answered' }, finishReason: 'stop', usage: { inputTokens, outputTokens: 0 } };
    },
  };
}

describe('a summary that is empty or cut short', () => {
  it.each(['empty', 'truncated'] as const)('(%s) above the threshold but below the emergency line: deferred, the run completes, history kept', async (summary) => {
    const agent = createAgentMachine({ model: model(summary, 10), compactor: summarizingCompactor({ keepTokens: 10 }), retry: false });
    const actor = createActor(agent, { input: { prompt: 'go', history, policy: { contextWindow: 1_500, compactThreshold: 50 } } });
    const compactions: unknown[] = [];
    actor.on('compaction.finished', (e) => compactions.push(e));
    const output = await runToCompletion(actor);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'answered' });
    expect(compactions).toEqual([expect.objectContaining({ reason: 'ThresholdExceeded', rewritten: false })]);
    expect(output.messages.slice(0, history.length)).toEqual(history);
  });

  it('at the emergency line: Failed(CompactionStalled), and the committed history is untouched', async () => {
    const agent = createAgentMachine({ model: model('empty', 10), compactor: summarizingCompactor({ keepTokens: 10 }), retry: false });
    const output = await runToCompletion(createActor(agent, { input: { prompt: 'go', history, policy: { contextWindow: 900 } } }));
    expect(output.outcome).toMatchObject({ type: 'Failed', error: { type: 'CompactionStalled' } });
    expect(output.messages).toEqual(history);
  });
});
