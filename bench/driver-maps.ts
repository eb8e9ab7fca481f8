/**
 * A child of `driver.bench.ts` (hidden classes made per turn): runs counted actor `index` for
 * `turns` turns, under `node --log-maps`, and exits; the index past the counted actors runs the
 * minimal agent in a `DurableSession` over the memory store. Usage: `driver-maps.ts <index> <turns>`.
 */
import { createActor, toPromise } from 'xstate';
import { countedActors, instantModel } from './driver.bench.js';
import { DurableSession } from '../src/sessions/durable-session.js';
import { MemorySessionStore } from '../src/stores/memory.js';
import type { AgentMachine } from '../machines/agent.machine.js';

const [index, turns] = process.argv.slice(2).map(Number);
const model = instantModel();
const actors = countedActors(model);
if (!Number.isInteger(index) || index! < 0 || index! > actors.length || !Number.isInteger(turns) || turns! < 1) {
  throw new Error(`usage: driver-maps.ts <index 0-${actors.length}> <turns>`);
}
model.reset(turns!);
if (index === actors.length) {
  const session = await DurableSession.open({ machine: actors[1]![1] as AgentMachine, store: new MemorySessionStore(), sessionId: 'maps' });
  session.send({ type: 'input', message: 'go' });
  await session.whenIdle();
  await session.close();
} else {
  await toPromise(createActor(actors[index!]![1], { input: { prompt: 'go' } }).start());
}
