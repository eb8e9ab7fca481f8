/**
 * The three example operations composed into one agent on a durable session
 * (`npx tsx examples/operations/main.ts`): memory before each model call, the CI gate before
 * tools, the ticket record after each reply. The run yields at the gate; the "CI system" sends
 * its result; the ticket's slice is stored with the session.
 */
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { MemorySessionStore } from '../../src/stores/memory.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { ciGateOperation } from './ci-gate.js';
import { memoryOperation, scriptedMemoryStore } from './memory.js';
import { ticketOperation } from './ticket.js';

export async function operationsDemo(log: (line: string) => void): Promise<{ slices: unknown; finalText: string | undefined }> {
  const memories = scriptedMemoryStore(['The checkout service deploys from the release branch.', 'Ticket T-42 is about checkout latency.']);
  const deploy = defineTool({ name: 'deploy', description: 'Deploys a service.', input: z.object({ service: z.string() }), execute: ({ service }) => `${service} deployed` });
  const machine = createAgentMachine({
    model: scriptedModel([{ toolCalls: [{ name: 'deploy', args: { service: 'checkout' } }] }, { text: 'Checkout is deployed; T-42 can be closed.' }]),
    tools: [deploy],
    // The gate yields before tools run, so it comes before anything that could run them.
    operations: [ciGateOperation(), memoryOperation(memories), ticketOperation('T-42')],
  });
  const store = new MemorySessionStore();
  const session = await DurableSession.open({
    machine,
    store,
    sessionId: 'T-42',
    attach: (actor) => {
      actor.on('operation.yielded', (e) => log(`yielded: ${e.operation} awaits ${e.reason} ${JSON.stringify(e.payload)}`));
      actor.on('tool.finished', (e) => log(`tool: ${e.result.content}`));
    },
  });
  session.send({ type: 'input', message: 'Deploy checkout for the latency ticket.' });
  await new Promise<void>((resolve) => {
    const check = () => JSON.stringify(session.actor.getSnapshot().value).includes('AwaitingOperation') && (resolve(), true);
    if (!check()) session.actor.subscribe(() => void check());
  });
  log('ci: passed');
  session.send({ type: 'operation.resume', operation: 'ci-gate', payload: { status: 'passed', url: 'https://ci.example/runs/42' } });
  const output = await session.whenIdle();
  const slices = session.actor.getSnapshot().context.operations.slices;
  await session.close();
  log(`memory looked up: ${memories.queries.length} time(s)`);
  log(`outcome: ${output?.outcome.type}`);
  log(`stored slices: ${JSON.stringify((((await store.load('T-42'))!.state) as { operations: { slices: unknown } }).operations.slices)}`);
  return { slices, finalText: output?.outcome.type === 'Completed' ? output.outcome.finalText : undefined };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await operationsDemo(console.log);
