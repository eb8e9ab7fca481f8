/**
 * Every `@example` in the package's TSDoc is type-checked (issue 19): the ```ts blocks of
 * src/** and machines/** compiled against the sources through the `loopchart` paths (see
 * doc-examples.ts for how a fragment gets its imports). A block that stops compiling (an API
 * renamed, a name imported from the wrong entry) fails here with its file and line. One compile
 * of the whole program (about 20 s of CPU), so it runs with the slow project, not `test:fast`.
 */
import { describe, expect, it } from 'vitest';
import { compileExamples, docExamples, type DocExample } from './doc-examples.js';

/** Blocks that must not compile: they show the check can fail, in the same compile as the real ones. */
const CANARIES: DocExample[] = [
  { where: 'canary:wrong-entry', file: 'canary', code: "import { scriptedModel } from 'loopchart';\nscriptedModel([{ text: 'hi' }]);" },
  { where: 'canary:renamed-api', file: 'canary', code: "new LoopMachine().acceptInputs({ role: 'user', content: 'hi' });" },
  { where: 'canary:not-public', file: 'canary', code: "import { countTextTokens } from 'loopchart';" },
];

describe('TSDoc examples', () => {
  const { examples, unfenced } = docExamples();

  it('every @example holds a ```ts block (so none escapes the compile)', () => {
    expect(examples.length).toBeGreaterThanOrEqual(80);
    expect(unfenced).toEqual([]);
  });

  it('every ```ts block of an @example compiles against the sources; broken blocks are reported', () => {
    const problems = compileExamples([...examples, ...CANARIES]);
    const real = problems.filter((problem) => !problem.where.startsWith('canary:'));
    expect(real.map(({ where, problem }) => `${where}: ${problem}`)).toEqual([]);
    for (const canary of CANARIES) expect(problems.some((problem) => problem.where === canary.where), canary.where).toBe(true);
  }, 300_000);
});
