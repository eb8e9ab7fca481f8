/**
 * The page's prompt of any model call, rebuilt from the nearest kept prompt (issue 24 item 5:
 * a keypress on a 10,000-message session rebuilt every prompt from the first call), is exactly
 * the prompt replay rebuilds from all the deltas, whatever order the rows are visited in.
 */
import { describe, expect, it } from 'vitest';
import { promptsOf, type TraceEntry } from '../../src/sessions/trace.js';
import { MemorySessionStore } from '../../src/stores/memory.js';
import { loadSessionView } from '../../src/viewer/load.js';
import { promptAt, rowsOf } from '../../src/viewer/rows.js';
import { writeBigSession } from './fixtures/big-session.js';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { scriptedModel } from '../../src/models/scripted.js';
import type { Guardrail } from '../../src/agent/guardrails.js';

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
