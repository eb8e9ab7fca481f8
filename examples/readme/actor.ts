// examples/readme/actor.ts
import { createAgentMachine, defineTool } from 'loopchart';
import { scriptedModel } from 'loopchart/testing';
import { createActor, toPromise } from 'xstate';
import { z } from 'zod';

const add = defineTool({
  name: 'add',
  description: 'Adds two numbers.',
  input: z.object({ a: z.number(), b: z.number() }),
  execute: ({ a, b }) => String(a + b),
});
const model = scriptedModel([{ toolCalls: [{ name: 'add', args: { a: 1, b: 2 } }] }, { text: 'It is 3.' }]);
const agent = createAgentMachine({ model, tools: [add] });

const actor = createActor(agent, { input: { prompt: 'What is 1 + 2?' } });
actor.on('tool.finished', ({ call, result }) => console.log(call.name, result.content)); // add 3
actor.start();
const output = await toPromise(actor);
console.log(output.outcome); // { type: 'Completed', finalText: 'It is 3.' }
