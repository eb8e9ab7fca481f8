// examples/readme/in-doubt.ts
import { z } from 'zod';
import { createAgentMachine, decideDoubtStored, defineTool, DurableSession, MemorySessionStore, type ApprovalRequest } from 'loopchart';
import { scriptedModel } from 'loopchart/testing';

let calls = 0;
const charge = defineTool({
  name: 'charge_card',
  description: 'Charges the card on file.',
  input: z.object({ cents: z.number() }),
  inDoubt: 'ask', // after a crash mid-call: ask a person, never charge twice on a guess
  execute: async ({ cents }) => {
    if (++calls === 1) await new Promise(() => {}); // the first process dies during this call
    return { charged: cents };
  },
});
const machine = () =>
  createAgentMachine({
    model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'charge_card', args: { cents: 500 } }] }, (request) => ({ text: `Result: ${request.messages.at(-1)!.content}` })]),
    tools: [charge],
  });
const store = new MemorySessionStore(); // each process below opens the same store: in production a SQLite file or PostgreSQL
const first = await DurableSession.open({ machine: machine(), store, sessionId: 'order-7' });
first.send({ type: 'input', message: 'Charge the order.' });
while (calls === 0) await new Promise((resolve) => setTimeout(resolve, 10));
await first.flush();
first.actor.stop(); // as a crash leaves it: the call started, no result

// The next process finds the call in doubt and waits (it runs nothing).
let shown: ApprovalRequest | undefined;
const second = await DurableSession.open({ machine: machine(), store, sessionId: 'order-7', attach: (a) => a.on('tool.inDoubt', (e) => (shown = e.requests[0])) });
while (!shown) await new Promise((resolve) => setTimeout(resolve, 10));
console.log(shown.toolName, calls); // charge_card 1
await second.close();

// A person checks the payment provider and gives the result by hand, from any process.
await decideDoubtStored(store, 'order-7', shown, { action: 'result', result: { charged: 500, note: 'found in the provider dashboard' }, by: 'ana' });
const third = await DurableSession.open({ machine: machine(), store, sessionId: 'order-7' });
const outcome = (await third.whenIdle())?.outcome;
console.log(outcome?.type === 'Completed' && outcome.finalText); // Result: {"charged":500,"note":"found in the provider dashboard"}
console.log(calls); // 1
await third.close();
await store.close();
