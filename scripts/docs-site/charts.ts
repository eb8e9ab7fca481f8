/**
 * `npm run docs:charts`: draws the brain's and the driver's statecharts, laid out by the viewer's
 * ELK layout from the machine definitions, into docs/images/brain-chart.svg and driver-chart.svg
 * (the pictures of the README and docs/concepts.md). Run it after changing a chart; test/docs/charts.test.ts
 * checks that each picture names every state of its chart.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { layoutChart } from '../../src/viewer/chart-layout.js';
import { brainChart } from '../../src/viewer/chart.js';
import { agentChart } from '../../src/viewer/server.js';
import { chartSvg } from '../../src/viewer/chart-svg.js';

const images = fileURLToPath(new URL('../../docs/images/', import.meta.url));
mkdirSync(images, { recursive: true });
for (const [file, chart, label] of [
  ['brain-chart.svg', brainChart(), "The brain's statechart (machines/loop.machine.ts)"],
  ['driver-chart.svg', agentChart(), "The driver's statechart (machines/agent.machine.ts)"],
] as const) {
  const started = performance.now();
  const layout = await layoutChart(chart);
  writeFileSync(join(images, file), chartSvg(layout, label));
  console.log(`docs/images/${file}: ${Math.round(layout.width)} × ${Math.round(layout.height)} px, ${chart.states.length} states, ${Math.round(performance.now() - started)} ms`);
}
