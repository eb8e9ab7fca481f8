/**
 * The order `npm test` starts its files in: the slow project first, then browser, mcp and fast.
 * Vitest's own order runs the projects by name (browser, fast, mcp, slow), which on a 2-core
 * machine left the crash series, minutes each, to start last and run alone at the end; the long
 * files first, the short ones filling the gaps, ends both workers at about the same time.
 * Within a project vitest's order stands (longest last run first, else largest file first).
 */
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const FIRST = ['slow', 'browser', 'mcp'];

const rank = (spec: TestSpecification) => {
  const at = FIRST.indexOf(spec.project.name);
  return at === -1 ? FIRST.length : at;
};

export class SlowFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    // Array.prototype.sort is stable: vitest's order holds within each rank.
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}
