/**
 * The live inspector shows a loopchart agent as one (the brain's chart, its state, runs and
 * tokens) whether it gets the actor's snapshots as they are or through `summarizingInspector`,
 * as docs/viewer.md advises for long conversations: the summary's `{ count, last }` lists are read
 * as message lists. Before, a wrapped agent was drawn as a plain machine with nothing counted.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createActor, toPromise } from 'xstate';
import { createAgentMachine, summarizingInspector } from '../../src/index.js';
import { scriptedModel } from '../../src/testing.js';
import { viewerInspector, type ViewerInspector } from '../../src/viewer.js';

const inspectors: ViewerInspector[] = [];
afterAll(async () => {
  for (const inspector of inspectors) await inspector.close();
});

/** The page data an inspected agent's page carries, after one finished run. */
async function pageOf(wrap: boolean) {
  const inspector = viewerInspector();
  inspectors.push(inspector);
  const url = new URL(await inspector.ready);
  const actor = createActor(createAgentMachine({ model: scriptedModel([{ text: 'Hello!' }]) }), {
    input: { prompt: 'Hi' },
    inspect: wrap ? summarizingInspector(inspector.inspect, { lastMessages: 1 }) : inspector.inspect,
  }).start();
  await toPromise(actor);
  const page = await fetch(new URL(`/a/${encodeURIComponent(actor.sessionId)}`, url));
  expect(page.status).toBe(200);
  const data = JSON.parse(/<script type="application\/json" id="loopchart-data">(.*?)<\/script>/s.exec(await page.text())![1]!) as {
    chart: { id: string };
    rows: Array<{ state: string; io: string; blocks: Array<[string, string]> }>;
  };
  const last = data.rows.at(-1)!;
  return { chart: data.chart.id, state: last.state, io: last.io, context: JSON.parse(last.blocks.find(([name]) => name === 'context')![1]) as { messages: number; lastMessages: unknown[] } };
}

describe('the live inspector and summarizingInspector', () => {
  it('an agent wrapped in summarizingInspector is shown as the agent it is, as it is unwrapped', async () => {
    const direct = await pageOf(false);
    const wrapped = await pageOf(true);
    expect(direct).toMatchObject({ chart: 'loop', state: 'Terminal', io: 'Done', context: { messages: 2 } });
    expect(wrapped).toMatchObject({ chart: direct.chart, state: direct.state, io: direct.io, context: { messages: 2 } });
    expect(wrapped.context.lastMessages).toEqual([{ role: 'assistant', content: 'Hello!' }]);
  });
});
