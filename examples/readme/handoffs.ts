// examples/readme/handoffs.ts
import { createAgentMachine, defineTool, DurableSession, MemorySessionStore } from 'loopchart';
import { scriptedModel } from 'loopchart/testing';
import { z } from 'zod';

const refund = defineTool({
  name: 'refund',
  description: 'Refunds an order.',
  input: z.object({ order: z.string() }),
  execute: ({ order }) => `refunded ${order}`,
});

// The triage agent hands refunds to billing by calling its transfer tool.
const agent = createAgentMachine({
  instructions: 'You are triage. Hand refunds to billing.',
  model: scriptedModel([{ toolCalls: [{ id: 't1', name: 'transfer_to_billing', args: {} }] }]),
  handoffs: {
    name: 'triage',
    history: 'filtered',
    agents: [
      {
        name: 'billing',
        description: 'Refunds and invoices.',
        instructions: 'You are billing.',
        tools: [refund],
        // Billing is shown the conversation without triage's tool traffic: its first reply is its script's first.
        model: scriptedModel([{ toolCalls: [{ id: 'r1', name: 'refund', args: { order: 'A-7' } }] }, { text: 'Refunded A-7.' }]),
        handoffs: ['triage'],
      },
    ],
  },
});

const store = new MemorySessionStore();
const session = await DurableSession.open({ machine: agent, store, sessionId: 'desk-1' });
session.actor.on('agent.handoff', ({ from, name }) => console.log(`${from} -> ${name}`)); // triage -> billing
session.send({ type: 'input', message: 'Please refund order A-7.' });
console.log((await session.whenIdle())?.outcome); // { type: 'Completed', finalText: 'Refunded A-7.' }
// Who speaks is stored with the session: reopened anywhere, the next message goes to billing.
console.log(session.actor.getSnapshot().context.agent); // { name: 'billing', from: 'triage' }
await session.close();
