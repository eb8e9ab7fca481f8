/** examples/operations: the memory, CI-gate and ticket operations composed on a durable session. */
import { describe, expect, it } from 'vitest';
import { operationsDemo } from '../../examples/operations/main.js';

describe('examples/operations', () => {
  it('memory before each model call, a yield at the CI gate resumed by the CI result, the ticket stored with the session', async () => {
    const lines: string[] = [];
    const { slices, finalText } = await operationsDemo((line) => lines.push(line));
    expect(finalText).toBe('Checkout is deployed; T-42 can be closed.');
    expect(lines.slice(0, 3)).toEqual(['yielded: ci-gate awaits ci-result {"calls":["call_1_0"]}', 'ci: passed', 'tool: checkout deployed']);
    // One lookup per user question: the second model call of the same question reuses the slice.
    expect(lines).toContain('memory looked up: 1 time(s)');
    expect(slices).toEqual({
      memory: { query: 'Deploy checkout for the latency ticket.', recalled: ['The checkout service deploys from the release branch.', 'Ticket T-42 is about checkout latency.'] },
      ticket: { id: 'T-42', status: 'answered', toolsUsed: ['deploy'], replies: 2 },
      'ci-gate': { results: [{ status: 'passed', url: 'https://ci.example/runs/42' }] },
    });
    expect(lines.at(-1)).toBe(`stored slices: ${JSON.stringify(slices)}`);
  });
});
