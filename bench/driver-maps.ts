/**
 * A child of `driver.bench.ts` (hidden classes made per turn): runs counted actor `index` for
 * `turns` turns, under `node --log-maps`, and exits. Usage: `driver-maps.ts <index> <turns>`.
 */
import { createActor, toPromise } from 'xstate';
import { countedActors, instantModel } from './driver.bench.js';

const [index, turns] = process.argv.slice(2).map(Number);
const model = instantModel();
const counted = countedActors(model)[index!];
if (!counted || !Number.isInteger(turns) || turns! < 1) throw new Error(`usage: driver-maps.ts <index 0-${countedActors(model).length - 1}> <turns>`);
model.reset(turns!);
await toPromise(createActor(counted[1], { input: { prompt: 'go' } }).start());
