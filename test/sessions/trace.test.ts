/**
 * The trace stores each model call's prompt as a delta from the previous one; the viewer rebuilds
 * every prompt exactly from those deltas.
 */
import { describe, expect, it } from 'vitest';
import type { Message } from '../../src/schemas.js';
import { PromptDelta, promptsOf, type TraceEntry } from '../../src/sessions/trace.js';

const user = (content: string): Message => ({ role: 'user', content });
const modelEntry = (turn: number, delta: ReturnType<PromptDelta['next']>): TraceEntry => ({
  type: 'model',
  at: 0,
  ms: 0,
  run: 1,
  turn,
  key: `k${turn}`,
  tools: [],
  ...delta,
});

describe('prompt deltas', () => {
  it('store only what is new, and rebuild every prompt exactly (a list grown in place, a new list, rebuilt system parts)', () => {
    const deltas = new PromptDelta();
    const system = { role: 'system' as const, content: 'Be brief.' };
    const grown: Message[] = [system, user('a')];
    const prompts: Message[][] = [];
    const entries: TraceEntry[] = [];
    const call = (messages: Message[]) => {
      prompts.push(structuredClone(messages));
      const delta = deltas.next(messages);
      entries.push(modelEntry(entries.length + 1, delta));
      return delta;
    };
    expect(call(grown)).toEqual({ promptBase: 0, promptDelta: [system, user('a')] });
    grown.push({ role: 'assistant', content: 'b' }, user('c'));
    expect(call(grown)).toEqual({ promptBase: 2, promptDelta: [{ role: 'assistant', content: 'b' }, user('c')] });
    // A new list (a compaction): the rebuilt system message with the same text is kept.
    const compacted: Message[] = [{ role: 'system', content: 'Be brief.' }, user('summary')];
    expect(call(compacted)).toEqual({ promptBase: 1, promptDelta: [user('summary')] });
    // That list grown in place: only its new message.
    compacted.push(user('d'));
    expect(call(compacted).promptBase).toBe(2);
    expect(promptsOf(entries)).toEqual(prompts);
  });
});
