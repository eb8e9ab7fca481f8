// examples/readme/structured-output.ts
import { runAgent, StructuredOutputError } from 'loopchart';
import { scriptedModel } from 'loopchart/testing';
import { z } from 'zod';

const City = z.object({ city: z.string(), population: z.number().int() });
// The first answer is wrong (a string where a number belongs): it goes back with its path.
const model = scriptedModel([
  { toolCalls: [{ name: 'final_answer', args: { city: 'Lyon', population: 'about half a million' } }] },
  { toolCalls: [{ name: 'final_answer', args: { city: 'Lyon', population: 520000 } }] },
]);

const { outcome, output, error } = await runAgent({ model, prompt: 'The largest city of the Rhône?', output: City });
console.log(outcome.type, output?.population); // Completed 520000
if (StructuredOutputError.isInstance(error)) console.error(`no valid answer: at ${error.path}`);
