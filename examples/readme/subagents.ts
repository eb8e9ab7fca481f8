// examples/readme/subagents.ts
import { agentTool, createAgentMachine, defineTool, DurableSession, MemorySessionStore } from 'loopchart';
import { scriptedModel } from 'loopchart/testing';
import { z } from 'zod';

// A specialist with its own instructions, model and tools; its file write needs a human's approval.
const publish = defineTool({
  name: 'publish',
  description: 'Publishes a note.',
  input: z.object({ text: z.string() }),
  needsApproval: true,
  execute: ({ text }) => `published: ${text}`,
});
const writer = createAgentMachine({
  instructions: 'You write and publish short notes.',
  model: scriptedModel([{ toolCalls: [{ id: 'p1', name: 'publish', args: { text: 'Tea at 4.' } }] }, { text: 'Published the note.' }]),
  tools: [publish],
});

// The coordinator calls it like any tool: the child's final text is the result.
const coordinator = createAgentMachine({
  model: scriptedModel([
    { toolCalls: [{ id: 'c1', name: 'writer', args: { task: 'Announce tea at 4.' } }] },
    { text: 'The writer published the note.' },
  ]),
  tools: [agentTool({ agent: writer, name: 'writer', description: 'Writes and publishes notes.' })],
});

const store = new MemorySessionStore();
const session = await DurableSession.open({ machine: coordinator, store, sessionId: 'team-1' });
// The child's approval shows at the parent, its id the path of calls down to it.
session.actor.on('approval.requested', ({ calls }) => {
  console.log(calls.map((call) => call.id)); // [ 'c1/p1' ]
  session.send({ type: 'approve', toolCallId: calls[0]!.id });
});
session.send({ type: 'input', message: 'Tell everyone about tea.' });
const output = await session.whenIdle();
console.log(output?.outcome); // { type: 'Completed', finalText: 'The writer published the note.' }
// The child ran as a session of its own, stored beside its parent.
console.log((await store.list()).map((s) => s.sessionId).sort()); // [ 'team-1', 'team-1/run-1:turn-1:c1' ]
await session.close();
