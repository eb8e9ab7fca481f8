import { createActor, toPromise } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from './machines/agent.machine.js';
import { defineTool } from './src/tools/define-tool.js';
const echo = defineTool({ name: 'echo', description: 'ok', input: z.object({ n: z.number().int() }), execute: () => 'ok' });
const TURNS = Number(process.env.TURNS ?? 1000), REPS = Number(process.env.REPS ?? 5);
let turn = 0;
const model = { name: 'instant', generate: async () => (++turn < TURNS ? { message: { role: 'assistant' as const, content: '', toolCalls: [{ id: `c${turn}`, name: 'echo', args: { n: turn } }] }, finishReason: 'tool-calls' as const, usage: { inputTokens: 100, outputTokens: 10 } } : { message: { role: 'assistant' as const, content: 'done' }, finishReason: 'stop' as const, usage: { inputTokens: 100, outputTokens: 10 } }) };
const machine = createAgentMachine({ model, tools: [echo], policy: { maxTurns: TURNS + 5 } } as any);
const t0 = performance.now();
for (let r = 0; r < REPS; r++) {
  turn = 0;
  const actor = createActor(machine, { input: { prompt: 'go' } as any });
  actor.start();
  await toPromise(actor);
}
console.log('µs/turn', ((performance.now() - t0) * 1000 / (TURNS * REPS)).toFixed(1));
