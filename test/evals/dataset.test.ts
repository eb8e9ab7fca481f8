import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { caseJson, loadDataset, parseCase, saveCases } from '../../src/evals/dataset.js';
import { DatasetError, EvalCaseError } from '../../src/evals/errors.js';
import { recordCase, recordCases } from '../../src/evals/record.js';
import { MemorySessionStore } from '../../src/stores/memory.js';
import { recordSession } from './support.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-evals-dataset-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('datasets', () => {
  it('a case is written pretty-printed with keys in a fixed order, and reads back to the same bytes', async () => {
    const folder = join(root, 'stable');
    // Keys given out of order: the file has the case's keys first, nested keys sorted.
    await saveCases(folder, [{ expect: { text: { matches: 'x', contains: 'y' }, outcome: 'Completed' }, input: ['hi'], id: 'one', format: 1 }]);
    const text = readFileSync(join(folder, 'one.json'), 'utf8');
    expect(text.split('\n').slice(0, 4)).toEqual(['{', '  "format": 1,', '  "id": "one",', '  "input": [']);
    expect(text.indexOf('"contains"')).toBeLessThan(text.indexOf('"matches"'));
    expect(caseJson(parseCase(text, join(folder, 'one.json')))).toBe(text);
  });

  it('a corrupt file is a DatasetError naming the file, line and case; the other cases load', async () => {
    const folder = join(root, 'corrupt');
    await saveCases(folder, [{ format: 1, id: 'good', input: ['hi'] }]);
    writeFileSync(join(folder, 'broken.json'), '{\n  "format": 1,\n  "id": "broken",\n  "input": ["a",]\n}\n');
    writeFileSync(join(folder, 'badshape.json'), '{\n  "format": 1,\n  "id": "badshape",\n  "input": ["a"],\n  "expect": {\n    "outcome": "Finished"\n  }\n}\n');
    writeFileSync(join(folder, 'old.json'), '{ "format": 0, "id": "old", "input": ["a"] }');
    const { cases, problems } = await loadDataset(folder);
    expect(cases.map((c) => c.id)).toEqual(['good']);
    expect(problems.every((p) => DatasetError.isInstance(p) && p.code === 'InvalidDataset')).toBe(true);
    const byCase = new Map(problems.map((p) => [p.caseId, p]));
    expect(byCase.get('broken')).toMatchObject({ line: 4, message: expect.stringMatching(/broken\.json:4 \(case 'broken'\): not JSON/) });
    expect(byCase.get('badshape')).toMatchObject({ line: 6, message: expect.stringContaining('expect.outcome: Invalid option') });
    expect(byCase.get('old')!.message).toContain('case format 0: this build reads format 1');
  });

  it('recordCase reads a row of an older version through its migrations; an unknown version is an EvalCaseError naming the case', async () => {
    const store = new MemorySessionStore();
    await recordSession(store, 'older');
    const stored = (await store.load('older'))!;
    // Version 1 rows have no approvals or operations (session-row.ts migrations).
    const { approvals: _a, operations: _o, runStartedAt: _r, ...v1 } = stored.state as Record<string, unknown>;
    await store.apply('older', { expectedVersion: stored.version, state: { ...v1, rowVersion: 1 } });
    const evalCase = await recordCase(store, 'older');
    expect(evalCase).toMatchObject({ id: 'older', input: ['Where is order A1?'], recording: { rowVersion: 1 }, expect: { outcome: 'Completed' } });
    const now = (await store.load('older'))!;
    await store.apply('older', { expectedVersion: now.version, state: { ...(now.state as object), rowVersion: 99 } });
    const error = await recordCase(store, 'older').catch((e: unknown) => e);
    expect(EvalCaseError.isInstance(error) && error.problem).toBe('recording');
    expect((error as Error).message).toMatch(/^case 'older': its stored row cannot be read: .*unknown state row version 99/);
  });

  it('recordCases chooses by ids, prefix and filter; a missing id and a session that never ran are problems, the rest recorded', async () => {
    const store = new MemorySessionStore();
    await recordSession(store, 'support/1');
    await recordSession(store, 'support-2');
    await recordSession(store, 'other');
    await store.apply('support-idle', { expectedVersion: 0, state: {} });
    const byPrefix = await recordCases(store, { prefix: 'support' });
    expect(byPrefix.cases.map((c) => c.id).sort()).toEqual(['support-1', 'support-2']);
    expect(byPrefix.problems.map((p) => p.caseId)).toEqual(['support-idle']);
    const byIds = await recordCases(store, { ids: ['other', 'gone'], filter: (s) => s.messageCount > 0 });
    expect(byIds.cases.map((c) => c.id)).toEqual(['other']);
    expect(byIds.problems.map((p) => p.message)).toEqual(["case 'gone': session 'gone' does not exist"]);
  });
});
