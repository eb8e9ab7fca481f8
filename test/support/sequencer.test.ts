/**
 * The order `npm test` starts its files in (sequencer.ts): the projects of long files first, the
 * distributed files spread among them so that two rarely run back to back (one waits for the
 * other's lock), the fast files last.
 */
import { describe, expect, it } from 'vitest';
import type { TestSpecification } from 'vitest/node';
import { SlowFirstSequencer, spread } from './sequencer.js';

/** A specification as the sequencer reads it: its project's name and settings, its file. */
const spec = (project: string, file: string) =>
  ({ project: { name: project, config: { sequence: { groupOrder: 0 }, isolate: project !== 'fast' } }, moduleId: `/repo/test/${file}` }) as unknown as TestSpecification;

/** No results or sizes cached (a fresh clone): vitest's order within a project is the given one. */
const vitest = { config: { root: '/repo' }, cache: { getFileTestResults: () => undefined, getFileStats: () => undefined } };

describe('the test sequencer', () => {
  it('starts slow, then processes, the distributed files among them, then browser, mcp and fast', async () => {
    const files = [
      spec('browser', 'b1'),
      spec('distributed', 'd1'),
      spec('distributed', 'd2'),
      spec('fast', 'f1'),
      spec('fast', 'f2'),
      spec('mcp', 'm1'),
      ...['p1', 'p2', 'p3'].map((file) => spec('processes', file)),
      spec('slow', 's1'),
    ];
    const sorted = await new SlowFirstSequencer(vitest as never).sort(files);
    expect(sorted.map((s) => s.moduleId.slice('/repo/test/'.length))).toEqual(['s1', 'p1', 'd1', 'p2', 'p3', 'd2', 'b1', 'm1', 'f1', 'f2']);
  });

  it('spreads few among many at even intervals, none lost, each list in its order', () => {
    expect(spread(['d1', 'd2', 'd3'], ['p1', 'p2', 'p3', 'p4', 'p5', 'p6'])).toEqual(['p1', 'p2', 'd1', 'p3', 'p4', 'd2', 'p5', 'p6', 'd3']);
    expect(spread(['d1', 'd2'], [])).toEqual(['d1', 'd2']);
    expect(spread([], ['p1'])).toEqual(['p1']);
    const out = spread(['d1', 'd2', 'd3'], ['p1', 'p2']);
    expect(out.filter((x) => x.startsWith('d'))).toEqual(['d1', 'd2', 'd3']);
    expect(out.filter((x) => x.startsWith('p'))).toEqual(['p1', 'p2']);
  });
});
