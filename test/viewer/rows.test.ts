/**
 * The page's prompt of any model call, a slice of a tape the appending calls share (issue 24
 * item 5: a keypress on a 10,000-message session rebuilt every prompt from the first call), is
 * exactly the prompt replay rebuilds from all the deltas, whatever order the rows are visited
 * in, also where a compaction rewrote the prompt and later calls appended to the new one.
 */
import { describe, expect, it } from 'vitest';
import { promptsOf, type TraceEntry } from '../../src/sessions/trace.js';
import { MemorySessionStore } from '../../src/stores/memory.js';
import { loadSessionView } from '../../src/viewer/load.js';
import { promptAt, rowsOf } from '../../src/viewer/rows.js';
import { readFileSync } from 'node:fs';
import { childSessionOf } from '../../src/agent/protocol/keys.js';
import { TraceEntrySchema } from '../../src/sessions/trace.js';
import { everyEntry, kindsCovered } from './fixtures/every-entry.js';
import { writeBigSession } from './fixtures/big-session.js';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { scriptedModel } from '../../src/models/scripted.js';
import type { Guardrail } from '../../src/agent/guardrails/guardrails.js';

describe('promptAt', () => {
  it('gives every model row the prompt the deltas add up to, visited in any order', async () => {
    const store = new MemorySessionStore();
    await writeBigSession(store, 'big', 1_000);
    const view = (await loadSessionView(store, 'big'))!;
    const builder = rowsOf({ session: view });
    const expected = promptsOf(view.trace.flatMap((record) => ('entry' in record ? [record.entry as TraceEntry] : [])));
    const modelRows = builder.rows.flatMap((row, index) => (row.kind === 'model' ? [index] : []));
    expect(modelRows).toHaveLength(expected.length);
    // The end first (every kept prompt built), then backwards, then a scatter.
    const order = [modelRows.at(-1)!, ...[...modelRows].reverse(), ...modelRows.filter((_, i) => i % 37 === 0)];
    for (const index of order) {
      const prompt = promptAt(builder, index)!;
      expect(prompt.messages).toEqual(expected[builder.rows[index]!.modelIndex]);
    }
  });

  it('a rewritten prompt starts a tape of its own: earlier prompts stay as they were', () => {
    const message = (content: string) => ({ role: 'user' as const, content });
    let at = 0;
    const model = (turn: number, promptBase: number, contents: string[]) =>
      ({ seq: ++at, entry: { type: 'model', at, ms: 1, run: 1, turn, key: `k${turn}`, tools: [], promptBase, promptDelta: contents.map(message), reply: { message: { role: 'assistant', content: `r${turn}` }, finishReason: 'stop', usage: { inputTokens: 1, outputTokens: 1 } } } }) as const;
    // Appends, then a compaction (the summary replaces all but the first message), then appends to it.
    const trace = [model(1, 0, ['a', 'b']), model(2, 2, ['c']), model(3, 1, ['summary']), model(4, 2, ['d', 'e']), model(5, 4, ['f'])];
    const builder = rowsOf({ session: { sessionId: 's', version: 1, messageCount: 0, updatedAt: null, error: null, state: null, messages: [], trace: trace as never } });
    const expected = promptsOf(trace.map((record) => record.entry as unknown as TraceEntry));
    expect(expected.map((prompt) => prompt.map((m) => m.content))).toEqual([['a', 'b'], ['a', 'b', 'c'], ['a', 'summary'], ['a', 'summary', 'd', 'e'], ['a', 'summary', 'd', 'e', 'f']]);
    for (const index of [4, 0, 2, 1, 3]) expect(promptAt(builder, index)!.messages).toEqual(expected[index]);
  });
});

describe('guardrail rows', () => {
  it('each guardrail verdict of a durable session is a row of its own, a refusal marked as an error', async () => {
    const store = new MemorySessionStore();
    const cite: Guardrail = { name: 'cite', check: ({ text }) => (text.includes('source') ? { type: 'pass' } : { type: 'feedback', message: 'Cite a source.' }) };
    const machine = createAgentMachine({ model: scriptedModel([{ text: '42' }, { text: '42 (source: guide)' }]), guardrails: { output: [cite] } });
    const session = await DurableSession.open({ machine, store, sessionId: 'g' });
    session.send({ type: 'input', message: 'answer?' });
    await session.whenIdle();
    await session.close();
    const rows = rowsOf({ session: (await loadSessionView(store, 'g'))! }).rows.filter((row) => row.kind === 'guardrail');
    expect(rows.map((row) => [row.title, row.error])).toEqual([
      ['output guardrail cite: feedback: Cite a source.', true],
      ['output guardrail cite: pass', false],
    ]);
  });
});

describe('rowsOf: one handler per kind of entry', () => {
  it('every kind of entry makes the rows it made before the table (rows, details, totals, prompts as recorded from the switch)', () => {
    // The trace schema's kinds, all in the fixture: a new kind without a row fails here (and, in the table, does not compile).
    expect([...kindsCovered].sort()).toEqual(TraceEntrySchema.options.map((option) => option.shape.type.value).sort());
    const session = { sessionId: 's', children: [childSessionOf({ session: 's', run: 1, turn: 1, call: 'c1' })], trace: everyEntry };
    const builder = rowsOf({ session } as never);
    const rows = builder.rows.map(({ detail, ...row }) => ({ ...row, ...detail() }));
    const made = JSON.parse(JSON.stringify({ rows, costUsd: builder.costUsd, closed: builder.closed, lastSeq: builder.lastSeq, prompts: builder.prompts.map((p) => ({ turn: p.turn, length: p.length, tape: p.tape.slice(0, p.length) })) }));
    // Written by the 301-line switch this table replaced (commit 4cc8eff's rowsOf), over the same fixture.
    const before = JSON.parse(readFileSync(new URL('./fixtures/rows-golden.json', import.meta.url), 'utf8'));
    expect(made).toEqual(before);
  });
});
