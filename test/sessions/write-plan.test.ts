/**
 * The durable session's write plan (issue 19, item 7): a journal entry the next step clears is
 * absorbed into that step; everything else is written as queued, in order.
 */
import { describe, expect, it } from 'vitest';
import { planWrites, type QueuedWrite } from '../../src/sessions/write-plan.js';

const result = (id: string) => ({ role: 'tool' as const, toolCallId: id, toolName: 'add', content: id });
const journal = (turnKey: string, id: string): QueuedWrite => ({ kind: 'journal', turnKey, entry: result(id) });
const step = (expectedVersion: number, clearJournal?: 'all' | string[]): QueuedWrite => ({
  kind: 'step',
  write: { expectedVersion, state: {}, ...(clearJournal && { clearJournal }) },
});

describe('planWrites', () => {
  it('absorbs the entries of a key the next step clears, and keeps the order of the rest', () => {
    const plan = planWrites([journal('b1', 'c1'), journal('p1', 'op'), step(3, ['b1']), journal('b2', 'c2')]);
    expect(plan).toEqual([
      journal('p1', 'op'),
      { kind: 'step', write: { expectedVersion: 3, state: {}, clearJournal: ['b1'] }, absorbed: [journal('b1', 'c1')] },
      journal('b2', 'c2'),
    ]);
  });

  it("'all' clears every key", () => {
    expect(planWrites([journal('b1', 'c1'), journal('b2', 'c2'), step(1, 'all')])).toEqual([
      { kind: 'step', write: { expectedVersion: 1, state: {}, clearJournal: 'all' }, absorbed: [journal('b1', 'c1'), journal('b2', 'c2')] },
    ]);
  });

  it('only the next step absorbs: a step that clears nothing comes between, the entry is written before it', () => {
    const plan = planWrites([journal('b1', 'c1'), step(1), step(2, ['b1'])]);
    expect(plan.map((write) => write.kind)).toEqual(['journal', 'step', 'step']);
    expect(plan.flatMap((write) => (write.kind === 'step' ? write.absorbed : []))).toEqual([]);
  });

  it('entries with no step after them, or a step that keeps their key, are written as queued', () => {
    expect(planWrites([journal('b1', 'c1'), journal('b1', 'c2')])).toEqual([journal('b1', 'c1'), journal('b1', 'c2')]);
    expect(planWrites([journal('b1', 'c1'), step(4, ['b0'])])).toEqual([
      journal('b1', 'c1'),
      { kind: 'step', write: { expectedVersion: 4, state: {}, clearJournal: ['b0'] }, absorbed: [] },
    ]);
  });
});
