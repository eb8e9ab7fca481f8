/**
 * Input the actor refuses (issue 41 #8) never ends the process: the actor of the docs' example
 * (`start()`, then `toPromise` in a try/catch) ends at once with `Failed(InvalidInput)`, and
 * the Node process exits 0. Before, XState caught the context factory's throw at createActor
 * and `start()` re-threw it from a timer with nobody subscribed: exit code 1 whatever the caller caught.
 */
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundledCommand, runNode, type NodeCommand } from '../../sessions/fixtures/processes.js';

let child: NodeCommand;
beforeAll(async () => {
  child = await bundledCommand(fileURLToPath(new URL('./fixtures/bad-input-actor.ts', import.meta.url)));
});
afterAll(() => child?.dispose());

describe('an actor created with input it refuses, in a real process', () => {
  for (const [field, problem] of [
    ['history', /^input\.history: starting history is not coherent: tool call 'a' at position 1 has no result$/],
    ['policy', /^input\.policy: contextWindow: /],
  ] as const) {
    it(`a bad input.${field}: the caller sees Failed(InvalidInput) naming the field, and the process exits 0`, async () => {
      const run = await runNode([...child.args, field], { timeoutMs: 30_000 });
      expect(run.stderr).not.toMatch(/InvalidFeed|Error/);
      expect(run.code).toBe(0);
      const seen = JSON.parse(run.lines.at(-1)!) as { settled: string; status: string; outcome: { type: string; error: { type: string; message: string } } };
      expect(seen).toMatchObject({ settled: 'resolved', status: 'done', outcome: { type: 'Failed', error: { type: 'InvalidInput' } } });
      expect(seen.outcome.error.message).toMatch(problem);
    });
  }
});
