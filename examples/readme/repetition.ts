// examples/readme/repetition.ts
import { defineTool, runAgent } from 'loopchart';
import { scriptedModel } from 'loopchart/testing';
import { z } from 'zod';

let searches = 0;
const search = defineTool({
  name: 'search',
  description: 'Searches the docs.',
  input: z.object({ query: z.string(), limit: z.number() }),
  execute: ({ query }) => (searches++, `no results for ${query}`),
});
// A stuck model: the same call every turn (key order does not make it a different call).
const stuck = () => scriptedModel(Array.from({ length: 8 }, (_, i) => ({ toolCalls: [{ name: 'search', args: i % 2 ? { limit: 5, query: 'refund' } : { query: 'refund', limit: 5 } }] })));

const { outcome, messages } = await runAgent({ model: stuck(), tools: [search], prompt: 'How do refunds work?' });
console.log(searches); // 2
// The 3rd batch is answered with a note instead of running; the 4th seals the run.
console.log(messages.filter((m) => m.role === 'tool')[2]?.content.slice(0, 56)); // error: not run. This is the 3rd time in a row you asked
console.log(outcome.type === 'Sealed' && outcome.reason); // repetition: search({"limit":5,"query":"refund"}) asked for 4 times in a row

// Off for an agent that polls on purpose; or `repetition: 5` to allow more.
const polling = await runAgent({ model: stuck(), tools: [search], prompt: 'Poll.', repetition: false, policy: { maxTurns: 8 } });
console.log(polling.outcome.type, searches); // MaxTurnsExceeded 10
