/**
 * Durable nesting under crashes (issue 22 item 3), with real child processes: a process is
 * SIGKILLed inside a child run at each kind of step (its model call, its tool call, its wait for
 * approval) and after a handoff inside the new agent's model call; a new process reopens the
 * session and finishes it. The parent's and the child's transcripts equal an uninterrupted run's,
 * no finished step runs again (only the one in flight at the kill, once more), the parent's tool
 * call stays in flight while its child is unfinished, and the handoff goes on with the closer.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NestedTask } from './fixtures/nested-child.js';
import { bundledCommand, runNode, type NodeCommand } from '../../sessions/fixtures/processes.js';
import type { StoreSpec } from '../../sessions/fixtures/stores.js';
import { effectsOf, storedSessions } from './fixtures/support.js';

const CHILD = fileURLToPath(new URL('./fixtures/nested-child.ts', import.meta.url));
const CHILD_ID = 'team/run-1:turn-1:c1';
const root = mkdtempSync(join(tmpdir(), 'loopchart-nested-crash-'));
let command: NodeCommand;
beforeAll(async () => {
  command = await bundledCommand(CHILD);
});
afterAll(() => {
  command?.dispose();
  rmSync(root, { recursive: true, force: true });
});

async function child(task: NestedTask, killAt?: string) {
  const run = await runNode([...command.args, JSON.stringify(task)], { env: { KILL_AT: killAt }, onLine: (line) => (line === 'PAUSED' ? 'kill' : undefined), timeoutMs: 30_000 });
  if (killAt ? run.signal !== 'SIGKILL' : run.code !== 0) throw new Error(`child ${task.mode} ended with ${run.code ?? run.signal}: ${run.stderr}`);
  return run;
}

const sorted = (lines: string[]) => [...lines].sort();
const stored = async (spec: StoreSpec) => {
  const [parent, sub] = await storedSessions(spec, ['team', CHILD_ID]);
  return { parent: parent!, sub: sub! };
};

/** Where each kill lands, and the step that was in flight there (it runs once more). */
const KILLS = [
  { at: 'model worker 2', again: 'model worker 2', childDone: false },
  { at: 'tool work', again: 'tool work', childDone: false },
  { at: 'approval', again: null, childDone: false },
  { at: 'model closer 3', again: 'model closer 3', childDone: true },
];

function series(backend: string, spec: (name: string) => StoreSpec) {
  return async () => {
    const task = (name: string, mode: NestedTask['mode']): NestedTask => ({ mode, store: spec(name), effects: join(root, `${backend}-${name}.effects`) });
    const reference = await child(task('ref', 'run'));
    expect(reference.lines).toContain('DONE {"type":"Completed","finalText":"Closed: the report is out."}');
    const ref = await stored(spec('ref'));
    const refEffects = effectsOf(task('ref', 'run').effects);
    expect(refEffects).toEqual(['model coordinator 1', 'model worker 1', 'tool work', 'model worker 2', 'tool publish', 'model worker 3', 'model coordinator 2', 'model closer 3']);

    for (const [i, kill] of KILLS.entries()) {
      const name = `k${i}`;
      await child(task(name, 'run'), kill.at);
      const atKill = await stored(spec(name));
      // The parent's call waits for its child: no result for c1 while the child is unfinished.
      if (!kill.childDone) {
        expect(atKill.parent.messages.some((m) => m.role === 'tool' && m.toolCallId === 'c1')).toBe(false);
        expect((atKill.parent.state as { brain: { value: string } }).brain.value).toBe('AwaitingTools');
      } else {
        expect((atKill.parent.state as { agent?: unknown }).agent).toEqual({ name: 'closer', from: 'coordinator' });
      }
      const resumed = await child(task(name, 'resume'));
      expect(resumed.lines, kill.at).toContain('DONE {"type":"Completed","finalText":"Closed: the report is out."}');
      const after = await stored(spec(name));
      expect(after.parent.messages, kill.at).toEqual(ref.parent.messages);
      expect(after.sub.messages, kill.at).toEqual(ref.sub.messages);
      expect(sorted(effectsOf(task(name, 'run').effects)), kill.at).toEqual(sorted([...refEffects, ...(kill.again ? [kill.again] : [])]));
    }
  };
}

describe('nested agents across SIGKILLs', () => {
  it('sqlite: killed in a child model call, tool call, approval wait, and after a handoff: resumed in a new process as uninterrupted', series('sqlite', (name) => ({ kind: 'sqlite', path: join(root, `${name}.db`) })), 180_000);

  const url = process.env.DATABASE_URL;
  describe.skipIf(!url)('postgres', () => {
    const schemas: string[] = [];
    afterAll(async () => {
      const admin = new pg.Pool({ connectionString: url, max: 1 });
      for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    });
    const base = `lc_nested_${process.pid}_${Date.now().toString(36)}`;
    const spec = (name: string): StoreSpec => {
      const schema = `${base}_${name}`;
      if (!schemas.includes(schema)) schemas.push(schema);
      return { kind: 'postgres', url: url!, schema };
    };
    it('the same on PostgreSQL', series('postgres', spec), 180_000);
  });
});
