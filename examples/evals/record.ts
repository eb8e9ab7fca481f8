/**
 * Records the example's dataset: runs the agent on a real session (its tools live, once), then
 * writes the session as a case with its trace. `npx tsx examples/evals/record.ts` rewrites
 * examples/evals/dataset/order-a1.json; the hand-written case beside it is not touched.
 */
import { fileURLToPath } from 'node:url';
import { DurableSession, MemorySessionStore, createAgentMachine } from '../../src/index.js';
import { recordCase, saveCases } from '../../src/evals.js';
import { agent } from './agent.js';

export async function recordExample(folder = fileURLToPath(new URL('./dataset', import.meta.url))): Promise<string[]> {
  const store = new MemorySessionStore();
  const session = await DurableSession.open({ machine: createAgentMachine(agent()), store, sessionId: 'order-a1' });
  session.send({ type: 'input', message: 'Where is my order A1?' });
  await session.whenIdle();
  await session.close();
  const evalCase = await recordCase(store, 'order-a1');
  return saveCases(folder, [{ ...evalCase, expect: { outcome: 'Completed', text: { contains: 'delivered' }, tools: { calls: [{ name: 'lookup', args: { order: 'A1' } }], order: 'exact' } } }]);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  for (const file of await recordExample()) console.log(`recorded ${file}`);
}
