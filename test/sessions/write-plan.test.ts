/**
 * The durable session's write plan (issue 19, item 7): the journal entry queued right before a
 * step that clears its key (the result that ended its batch) is absorbed into that step;
 * everything else is written as queued, in order.
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
  it('absorbs the entry right before a step that clears its key, and keeps the order of the rest', () => {
    const plan = planWrites([journal('p1', 'op'), journal('b1', 'c1'), step(3, ['b1', 'p1']), journal('b2', 'c2')]);
    expect(plan).toEqual([
      journal('p1', 'op'),
      { kind: 'step', write: { expectedVersion: 3, state: {}, clearJournal: ['b1', 'p1'] }, absorbed: [journal('b1', 'c1')] },
      journal('b2', 'c2'),
    ]);
  });

  it('only the last result of a batch: one that arrived earlier is written even if the drain came late', () => {
    // Whether c1 was drained before c2 arrived or not, the same writes reach the store.
    const late = planWrites([journal('b1', 'c1'), journal('b1', 'c2'), step(5, ['b1'])]);
    const early = [...planWrites([journal('b1', 'c1')]), ...planWrites([journal('b1', 'c2'), step(5, ['b1'])])];
    expect(late).toEqual(early);
    expect(late).toEqual([journal('b1', 'c1'), { kind: 'step', write: { expectedVersion: 5, state: {}, clearJournal: ['b1'] }, absorbed: [journal('b1', 'c2')] }]);
  });

  it("'all' clears every key", () => {
    expect(planWrites([journal('b1', 'c1'), journal('b2', 'c2'), step(1, 'all')])).toEqual([
      journal('b1', 'c1'),
      { kind: 'step', write: { expectedVersion: 1, state: {}, clearJournal: 'all' }, absorbed: [journal('b2', 'c2')] },
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
