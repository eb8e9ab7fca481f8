/**
 * The chart pictures of the README and docs/concepts.md (docs/images/, drawn by `npm run
 * docs:charts`) show the charts as they are: every state of the brain's and the driver's chart,
 * and no state that is gone. A chart changed without redrawing its picture fails here.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { brainChart } from '../../src/viewer/chart.js';
import { agentChart } from '../../src/viewer/server.js';
import { REPO } from './markdown.js';

const drawnStates = (file: string): string[] =>
  [...readFileSync(join(REPO, 'docs', 'images', file), 'utf8').matchAll(/data-state="([^"]+)"/g)].map((m) => m[1]!.replace(/&quot;/g, '"').replace(/&amp;/g, '&')).sort();

describe('the chart pictures in docs/images', () => {
  it.each([
    ['brain-chart.svg', brainChart],
    ['driver-chart.svg', agentChart],
  ])('%s draws every state of its chart (else: npm run docs:charts)', (file, chart) => {
    expect(drawnStates(file)).toEqual(chart().states.map((state) => state.id).sort());
  });
});
