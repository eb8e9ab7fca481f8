// examples/readme/tool-policy.ts
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAgentMachine, readFileTool, writeFileTool, type ToolPolicy } from 'loopchart';
import { callBudget, pathRule } from 'loopchart/policies';
import { scriptedModel } from 'loopchart/testing';
import { createActor, waitFor } from 'xstate';

const root = mkdtempSync(join(tmpdir(), 'policy-'));
mkdirSync(join(root, 'docs'));
writeFileSync(join(root, 'docs', 'plan.md'), 'Ship on Friday.');
// Your own rule sees the call and the whole run: a write waits for a human unless a read succeeded before it.
const readBeforeWrite: ToolPolicy = ({ call, earlierCalls }) =>
  call.name !== 'write_file' || earlierCalls.some(({ call, result }) => call.name === 'read_file' && result && !result.isError)
    ? { type: 'allow' }
    : { type: 'needs-approval' };

const model = scriptedModel([
  { toolCalls: [{ name: 'read_file', args: { path: '../secret.txt' } }, { name: 'write_file', args: { path: 'docs/notes.md', content: 'hi' } }] },
  { toolCalls: [{ name: 'read_file', args: { path: 'docs/plan.md' } }, { name: 'read_file', args: { path: 'docs/plan.md' } }] },
  { text: 'Done.' },
]);
const agent = createAgentMachine({
  model,
  tools: [readFileTool({ root }), writeFileTool({ root })],
  // In order; the first deny wins, then any needs-approval, else the call may go on to its own approval rule.
  toolPolicy: [pathRule({ roots: [join(root, 'docs')], base: root }), callBudget({ read_file: 2 }), readBeforeWrite],
});
const actor = createActor(agent, { input: { prompt: 'Tidy the notes.' } });
const results = new Map<string, string>();
actor.on('tool.finished', ({ call, result }) => results.set(call.id, result.content));
actor.start();
const waiting = await waitFor(actor, (s) => s.context.approvals.waiting.length > 0);
console.log('waiting:', waiting.context.approvals.waiting.join(', ')); // waiting: call_1_1
actor.send({ type: 'approve', toolCallId: 'call_1_1' });
const done = await waitFor(actor, (s) => s.status === 'done');
console.log(results.get('call_1_0')); // denied: read_file: path "../secret.txt" is outside the allowed roots
console.log(results.get('call_1_1')); // wrote 2 bytes to docs/notes.md
// Calls count against the budget as the model asks for them, the denied one of turn 1 included.
console.log(results.get('call_2_1')); // denied: call budget for read_file spent: 2 per run
console.log(done.output?.outcome.type); // Completed
