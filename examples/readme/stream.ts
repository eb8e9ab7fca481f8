// examples/readme/stream.ts
import { defineTool, streamAgent } from 'loopchart';
import { scriptedModel } from 'loopchart/testing';
import { z } from 'zod';

const add = defineTool({
  name: 'add',
  description: 'Adds two numbers.',
  input: z.object({ a: z.number(), b: z.number() }),
  execute: ({ a, b }) => a + b,
});
const model = scriptedModel([{ toolCalls: [{ name: 'add', args: { a: 2, b: 3 } }] }, { text: 'It is 5.' }]);

for await (const event of streamAgent({ model, tools: [add], prompt: 'What is 2 + 3?' })) {
  if (event.type === 'text.delta') process.stdout.write(event.delta);
  if (event.type === 'tool.started') console.log(`→ ${event.call.name} ${JSON.stringify(event.call.args)}`);
  if (event.type === 'tool.finished') console.log(`← ${event.result.content}`);
  if (event.type === 'done') console.log(`\n${event.result.outcome.type}`); // Completed
  if (event.type === 'done' && event.result.error) {
    console.error(event.result.error.message); // why it failed, in one line
    process.exitCode = 1;
  }
}
