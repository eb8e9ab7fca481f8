/**
 * The order `npm test` starts its files in. Vitest's own order runs the projects by name
 * (browser, distributed, fast, mcp, processes, slow), which on a 2-core machine left long files to
 * start late and run alone at the end. Here the long files go first and the short ones fill the
 * gaps, so both workers end at about the same time:
 *   slow (the SIGKILL series and the packed tarball, minutes each), then processes (files that
 *   mostly wait on child processes), the distributed files spread among those two, then timed
 *   (files that wait on the wall clock), browser, mcp, and the fast project's many short files last.
 * A distributed file runs only while no other one does (test/distributed/support/one-at-a-time.ts):
 * spread out among long files, one rarely waits for another.
 * Within a project vitest's order stands (longest last run first, else largest file first).
 */
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** The projects in the order they start; the distributed files go among the slow and processes ones. */
const ORDER = ['slow', 'processes', 'timed', 'browser', 'mcp', 'fast'];

export class SlowFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const of = (name: string) => sorted.filter((spec) => spec.project.name === name);
    const [slow, processes, ...rest] = ORDER.map(of);
    const unknown = sorted.filter((spec) => spec.project.name !== 'distributed' && !ORDER.includes(spec.project.name));
    return [...spread(of('distributed'), [...slow!, ...processes!]), ...rest.flat(), ...unknown];
  }
}

/** `few` among `many` at even intervals, each after at least one of `many` while they last. */
export function spread<T>(few: readonly T[], many: readonly T[]): T[] {
  const out: T[] = [];
  let placed = 0;
  many.forEach((item, i) => {
    out.push(item);
    // After the (i+1)-th of many, as many of few as their even share up to here.
    while (placed < few.length && (placed + 1) * many.length <= (i + 1) * few.length) out.push(few[placed++]!);
  });
  return [...out, ...few.slice(placed)];
}
