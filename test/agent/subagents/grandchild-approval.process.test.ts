/**
 * An approval inside a grandchild (3 levels: lead → editor → writer), decided from another
 * process (issue 22 item 4), with real processes on a durable store: process A starts the session
 * and stops (a normal exit, or SIGKILL) while the writer's tool waits for approval; process B
 * opens the same store and decides the call at the root, by the id the root showed
 * (`c1/e1/w1`), through `DurableSession.decide`, or straight in the store through `decideStored`
 * (then a third process resumes the run). The writer's tool runs once, the three transcripts
 * equal an uninterrupted run's, and the root's and the editor's calls have no result until the
 * decision. A decision the writer refuses (another digest) is refused at the root too: by the
 * root's `decide` (the refusal comes up the tree) and by `decideStored`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { agentTool } from '../../../src/agent/subagents/agent-tool.js';
import type { ApprovalRequest } from '../../../src/agent/approvals/approval-binding.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { ApprovalRefusedError } from '../../../src/sessions/stored-decision.js';
import { SqliteSessionStore } from '../../../src/stores/sqlite.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import type { GrandchildTask } from './fixtures/grandchild-approval.js';
import { bundledCommand, runNode, type NodeCommand } from '../../sessions/fixtures/processes.js';
import type { StoreSpec } from '../../sessions/fixtures/stores.js';
import { effectsOf, storedSessions } from './fixtures/support.js';

// The tree's sessions: `<parent>/<run>:<turn>:<call id>` at each level.
const [ROOT_ID, CHILD_ID, GRANDCHILD_ID] = ['team', 'team/run-1:turn-1:c1', 'team/run-1:turn-1:c1/run-1:turn-1:e1'];
const FINAL_TEXT = 'lead: editor: writer: written report';
const FIXTURE = fileURLToPath(new URL('./fixtures/grandchild-approval.ts', import.meta.url));
const DONE = `DONE ${JSON.stringify({ type: 'Completed', finalText: FINAL_TEXT })}`;
const root = mkdtempSync(join(tmpdir(), 'loopchart-grandchild-approval-'));
let command: NodeCommand;
beforeAll(async () => {
  command = await bundledCommand(FIXTURE);
});
afterAll(() => {
  command?.dispose();
  rmSync(root, { recursive: true, force: true });
});

/** Runs the fixture; `stop` says how a `start` ends (its request line is returned as `request`). */
async function processRun(task: GrandchildTask, stop?: 'exit' | 'kill') {
  const run = await runNode([...command.args, JSON.stringify(task)], {
    env: { STOP: stop },
    onLine: (line) => (stop === 'kill' && line.startsWith('WAITING ') ? 'kill' : undefined),
    timeoutMs: 60_000,
  });
  const expected = stop === 'kill' ? run.signal === 'SIGKILL' : run.code === 0;
  if (!expected) throw new Error(`${task.mode} ended with ${run.code ?? run.signal}: ${run.stderr}\n${run.lines.join('\n')}`);
  const waiting = run.lines.find((line) => line.startsWith('WAITING '));
  return { lines: run.lines, request: waiting ? (JSON.parse(waiting.slice('WAITING '.length)) as GrandchildTask['request']) : undefined };
}

const hasResult = (messages: readonly { role: string; toolCallId?: string }[], id: string) => messages.some((m) => m.role === 'tool' && m.toolCallId === id);

/** The three sessions of the tree as stored. */
async function stored(spec: StoreSpec) {
  const [lead, editor, writer] = await storedSessions(spec, [ROOT_ID, CHILD_ID, GRANDCHILD_ID]);
  return { lead: lead!, editor: editor!, writer: writer! };
}

/** The tree while the writer waits: no result for the root's call, the editor's, or the writer's. */
async function expectInFlight(spec: StoreSpec, effects: string, why: string) {
  const tree = await stored(spec);
  expect(hasResult(tree.lead.messages, 'c1'), why).toBe(false);
  expect((tree.lead.state as { brain: { value: string } }).brain.value, why).toBe('AwaitingTools');
  expect(hasResult(tree.editor.messages, 'e1'), why).toBe(false);
  expect(hasResult(tree.writer.messages, 'w1'), why).toBe(false);
  expect(effectsOf(effects), why).not.toContain('tool write');
}

function series(backend: string, spec: (name: string) => StoreSpec) {
  return async () => {
    const task = (name: string, mode: GrandchildTask['mode'], request?: GrandchildTask['request']): GrandchildTask => ({
      mode,
      store: spec(name),
      effects: join(root, `${backend}-${name}.effects`),
      ...(request && { request }),
    });
    const reference = await processRun(task('ref', 'reference'));
    expect(reference.lines).toContain(DONE);
    const ref = await stored(spec('ref'));
    const refEffects = effectsOf(task('ref', 'reference').effects);
    expect(refEffects).toEqual(['model lead 1', 'model editor 1', 'model writer 1', 'tool write', 'model writer 2', 'model editor 2', 'model lead 2']);

    const cases = [
      { name: 'exit-open', stop: 'exit', decide: 'decide' },
      { name: 'kill-open', stop: 'kill', decide: 'decide' },
      { name: 'exit-store', stop: 'exit', decide: 'decide-stored' },
      { name: 'kill-store', stop: 'kill', decide: 'decide-stored' },
    ] as const;
    for (const { name, stop, decide } of cases) {
      const started = await processRun(task(name, 'start'), stop);
      expect(started.request, name).toMatchObject({ toolCallId: 'c1/e1/w1', run: 1 });
      await expectInFlight(spec(name), task(name, 'start').effects, `${name}: after A stopped`);

      if (decide === 'decide-stored') {
        // A decision that goes down the tree is checked where the call waits: another digest is refused there.
        const wrong = await processRun(task(name, decide, { ...started.request!, digest: '0'.repeat(64) }));
        expect(wrong.lines, name).toEqual(['REFUSED changed']);
        await expectInFlight(spec(name), task(name, 'start').effects, `${name}: refused in the store`);
      }
      // Process B decides at the root, by the request the root showed in process A.
      const decided = await processRun(task(name, decide, started.request));
      if (decide === 'decide-stored') {
        expect(decided.lines, name).toEqual(['DECIDED']);
        // Deciding does not run the call: the tree still waits for a process with the agent.
        await expectInFlight(spec(name), task(name, 'start').effects, `${name}: decided in the store`);
        const resumed = await processRun(task(name, 'resume'));
        expect(resumed.lines, name).toContain(DONE);
      } else {
        expect(decided.lines, name).toContain(DONE);
      }

      const after = await stored(spec(name));
      expect(after.lead.messages, name).toEqual(ref.lead.messages);
      expect(after.editor.messages, name).toEqual(ref.editor.messages);
      expect(after.writer.messages, name).toEqual(ref.writer.messages);
      // No step ran twice: the writer's tool ran once, after the decision; no model was asked again.
      expect(effectsOf(task(name, 'start').effects), name).toEqual(refEffects);
    }
  };
}

describe('an approval inside a grandchild, decided at the root of a durable session', () => {
  it("a decision the grandchild refuses (another digest) is refused at the root's decide, and the call still waits", async () => {
    const ran: string[] = [];
    const write = defineTool({ name: 'write', description: 'w', input: z.object({ text: z.string() }), needsApproval: true, execute: ({ text }) => (ran.push(text), 'written') });
    const writer = createAgentMachine({ model: scriptedModel([{ toolCalls: [{ id: 'w1', name: 'write', args: { text: 'report' } }] }, { text: 'writer done' }]), tools: [write] });
    const delegate = (id: string, name: string) => ({ toolCalls: [{ id, name, args: { task: 'go' } }] });
    const editor = createAgentMachine({ model: scriptedModel([delegate('e1', 'writer'), { text: 'editor done' }]), tools: [agentTool({ agent: writer, name: 'writer', description: 'w' })] });
    const lead = createAgentMachine({ model: scriptedModel([delegate('c1', 'editor'), { text: 'lead done' }]), tools: [agentTool({ agent: editor, name: 'editor', description: 'e' })] });
    const store = new SqliteSessionStore({ path: join(root, 'refused.db') });
    let announced: (request: ApprovalRequest) => void;
    const asked = new Promise<ApprovalRequest>((resolve) => (announced = resolve));
    const session = await DurableSession.open({ machine: lead, store, sessionId: ROOT_ID, attach: (actor) => actor.on('approval.requested', ({ requests }) => announced(requests[0]!)) });
    session.send({ type: 'input', message: 'go' });
    const request = await asked;
    expect(request.toolCallId).toBe('c1/e1/w1');
    const refused = await session.decide({ ...request, digest: '0'.repeat(64) }, { approved: true }).then(() => null, (error: unknown) => error);
    expect(ApprovalRefusedError.isInstance(refused) && [refused.toolCallId, refused.reason]).toEqual(['c1/e1/w1', 'changed']);
    expect(ran).toEqual([]);
    await session.decide(request, { approved: true });
    expect((await session.whenIdle())?.outcome).toMatchObject({ type: 'Completed', finalText: 'lead done' });
    expect(ran).toEqual(['report']);
    await session.close();
    await store.close();
  });
});

describe('an approval inside a grandchild, decided from another process', () => {
  it('sqlite: process A stops (exit, SIGKILL) while the writer waits; process B decides c1/e1/w1 at the root; the run completes as uninterrupted', series('sqlite', (name) => ({ kind: 'sqlite', path: join(root, `${name}.db`) })), 240_000);

  const url = process.env.DATABASE_URL;
  describe.skipIf(!url)('postgres', () => {
    const schemas: string[] = [];
    afterAll(async () => {
      const admin = new pg.Pool({ connectionString: url, max: 1 });
      for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    });
    const base = `lc_grandchild_${process.pid}_${Date.now().toString(36)}`;
    const spec = (name: string): StoreSpec => {
      const schema = `${base}_${name.replace('-', '_')}`;
      if (!schemas.includes(schema)) schemas.push(schema);
      return { kind: 'postgres', url: url!, schema };
    };
    it('the same on PostgreSQL', series('postgres', spec), 240_000);
  });
});
