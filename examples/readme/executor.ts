// examples/readme/executor.ts
import { createAgentMachine, defineTool, type Executor } from 'loopchart';
import { scriptedModel } from 'loopchart/testing';
import { createActor, toPromise } from 'xstate';
import { z } from 'zod';

// Sees every side effect: its kind, its idempotency key and how long it took.
const logged: Executor = async (effect, perform) => {
  const started = performance.now();
  try {
    return await perform();
  } finally {
    console.log(`${effect.kind} ${effect.key} ${(performance.now() - started).toFixed(1)} ms`);
  }
};

const echo = defineTool({ name: 'echo', description: 'Echoes.', input: z.object({ text: z.string() }), execute: ({ text }) => text });
const model = scriptedModel([{ toolCalls: [{ id: 'c1', name: 'echo', args: { text: 'hi' } }] }, { text: 'Done.' }]);
const agent = createAgentMachine({ model, tools: [echo], executor: logged });
const output = await toPromise(createActor(agent, { input: { prompt: 'Echo hi', sessionId: 'demo' } }).start());
console.log(output.outcome.type); // Completed
