/**
 * docs/matrix.md is what the declared matrix generates (test/agent/matrix/cells.ts): a cell added
 * to the declaration without regenerating the page, or the page edited to claim a cell, fails
 * here. Regenerate with `LOOPCHART_WRITE_MATRIX=1 npx vitest run test/agent/matrix`, which writes
 * the results of the run: a tested cell that failed reads FAILED there, and then this test fails.
 */
import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import { HOSTS, cellOf, renderMatrix } from './cells.js';
import { FEATURES, SCENARIOS } from './scenarios.js';

it('docs/matrix.md is the table the declared matrix generates', () => {
  const page = readFileSync(new URL('../../../docs/matrix.md', import.meta.url), 'utf8');
  expect(page).toBe(renderMatrix());
});

it('every feature has a scenario, and every cell declared tested is on a host a suite of the matrix runs', () => {
  expect(SCENARIOS.map((scenario) => scenario.id)).toEqual([...FEATURES]);
  for (const feature of FEATURES) {
    for (const host of HOSTS) {
      if (cellOf(feature, host.id).status !== 'tested') continue;
      // In process: matrix.test.ts. On a server: test/distributed/matrix.test.ts, whose one driver is the Restate session object's.
      if (host.runs === 'distributed') expect(host.id, `${feature} × ${host.id}`).toBe('restate');
      else expect(['fast', 'postgres'], `${feature} × ${host.id}`).toContain(host.runs);
    }
  }
});
