/**
 * Approvals and steering across processes (issue 6): a real child process (tsx) runs a durable
 * session on a SQLite file; another process continues it. The conversation: one free call
 * (`lookup`) and two calls that need approval (`write_file` report.md, notes.md), then an answer.
 * Side effects are lines in a file, so "ran exactly once" is checked across processes.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Message, Outcome } from '../../../src/schemas.js';
import { SqliteSessionStore } from '../../../src/stores/sqlite.js';
import type { ChildTask } from './fixtures/hitl-child.js';
import { allTagged, runChild, tagged, type ChildRun } from './fixtures/processes.js';
import { bundledCommand, type NodeCommand } from '../../sessions/fixtures/processes.js';
import { providerValid, resultsById } from '../../support/hitl.js';

const CHILD = fileURLToPath(new URL('./fixtures/hitl-child.ts', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'loopchart-hitl-'));
let child: NodeCommand;
beforeAll(async () => {
  child = await bundledCommand(CHILD);
});
afterAll(() => {
  child?.dispose();
  rmSync(root, { recursive: true, force: true });
});

// The full state value while calls wait and nothing else may run.
const AWAITING = { Running: { AwaitingTools: { Working: { Execution: 'Paused', Approval: 'AwaitingApproval', Doubt: 'Clear' } } } };

let counter = 0;
function newSession() {
  const n = ++counter;
  return { db: join(root, `s${n}.db`), sessionId: `hitl-${n}`, effects: join(root, `s${n}.effects`) };
}
type Session = ReturnType<typeof newSession>;

/** Runs one phase in a new process; `kill` phases must end by SIGKILL after PAUSED. */
async function phase(session: Session, task: Omit<ChildTask, keyof Session>): Promise<ChildRun> {
  const run = await runChild(child, [JSON.stringify({ ...session, ...task })], {
    onLine: (line) => (line === 'PAUSED' ? 'kill' : undefined),
  });
  if (task.after === 'kill') {
    if (run.signal !== 'SIGKILL' || !run.lines.includes('PAUSED')) {
      throw new Error(`child should have been killed while waiting, ended with ${run.code ?? run.signal}: ${run.stderr}`);
    }
  } else if (run.code !== 0) {
    throw new Error(`child failed (${run.code ?? run.signal}): ${run.stderr}\n${run.lines.join('\n')}`);
  }
  return run;
}

/** `<tool> <id> <arg>` side-effect lines, per call id. */
function effects(session: Session): Map<string, number> {
  let text = '';
  try {
    text = readFileSync(session.effects, 'utf8');
  } catch {
    // nothing ran
  }
  const counts = new Map<string, number>();
  for (const line of text.split('\n').filter(Boolean)) {
    const id = line.split(' ')[1]!;
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

/** Every model request of every process, in order: each must be provider-valid. */
const requestsOf = (...runs: ChildRun[]) => runs.flatMap((run) => allTagged<Message[][]>(run, 'REQUESTS').flat());

async function stored(session: Session) {
  const store = new SqliteSessionStore({ path: session.db });
  try {
    const loaded = (await store.load(session.sessionId))!;
    const journal = await store.journaledToolResults(session.sessionId, `${session.sessionId}:run-1:turn-1:tools`);
    return { ...loaded, journal };
  } finally {
    await store.close();
  }
}

/** Process A: prompt sent, stops (closes or is SIGKILLed) while both writes wait. */
async function startAndStop(session: Session, after: 'close' | 'kill') {
  const a = await phase(session, { phase: 'start', after });
  expect(tagged(a, 'STATE')).toEqual(AWAITING);
  expect(tagged(a, 'WAITING')).toEqual(['call_1_1', 'call_1_2']);
  expect(tagged(a, 'ASKED')).toEqual([['call_1_1', 'call_1_2']]);
  // The free call ran before any decision; nothing that needs approval did.
  expect(Object.fromEntries(effects(session))).toEqual({ call_1_0: 1 });
  return a;
}

describe('an approval survives the process that asked for it', () => {
  it('process A waits and stops; process B opens the session, sees the waiting calls, approves and finishes; each tool ran once', async () => {
    const session = newSession();
    const a = await startAndStop(session, 'close');
    const b = await phase(session, {
      phase: 'decide',
      after: 'finish',
      decisions: [
        { type: 'approve', toolCallId: 'call_1_1' },
        { type: 'approve', toolCallId: 'call_1_2' },
      ],
    });
    expect(tagged(b, 'STATE')).toEqual(AWAITING);
    expect(tagged(b, 'WAITING')).toEqual(['call_1_1', 'call_1_2']);
    expect(tagged(b, 'ASKED')).toEqual([['call_1_1', 'call_1_2']]);
    expect(tagged<Outcome>(b, 'DONE')).toEqual({ type: 'Completed', finalText: 'Done (call_1_0=ok call_1_1=ok call_1_2=ok).' });
    expect(Object.fromEntries(effects(session))).toEqual({ call_1_0: 1, call_1_1: 1, call_1_2: 1 });
    expect(tagged(b, 'ASKED_TOTAL')).toEqual([['call_1_1', 'call_1_2']]);

    const requests = requestsOf(a, b);
    expect(requests).toHaveLength(2); // the model was not called again for the batch it had answered
    expect(requests.filter((r) => !providerValid(r))).toEqual([]);
    const db = await stored(session);
    expect(db.messages).toEqual(tagged(b, 'MESSAGES'));
    expect(providerValid(db.messages.slice(1))).toBe(true);
    expect(db.journal).toEqual([]);
    expect((db.state as { approvals: unknown }).approvals).toEqual({ waiting: [], decisions: {}, standing: {} });
  });

  it('process A is SIGKILLed while waiting; process B approves one, denies the other with a reason; the model reads the denial', async () => {
    const session = newSession();
    const a = await startAndStop(session, 'kill');
    const b = await phase(session, {
      phase: 'decide',
      after: 'finish',
      decisions: [
        { type: 'deny', toolCallId: 'call_1_2', reason: 'the notes are fine as they are' },
        { type: 'approve', toolCallId: 'call_1_1' },
      ],
    });
    expect(tagged(b, 'STATE')).toEqual(AWAITING);
    expect(tagged(b, 'WAITING')).toEqual(['call_1_1', 'call_1_2']);
    expect(tagged<Outcome>(b, 'DONE')).toEqual({ type: 'Completed', finalText: 'Done (call_1_0=ok call_1_1=ok call_1_2=error).' });
    expect(Object.fromEntries(effects(session))).toEqual({ call_1_0: 1, call_1_1: 1 });
    const messages = tagged<Message[]>(b, 'MESSAGES')!;
    const denial = resultsById(messages).get('call_1_2')!;
    expect(denial).toMatchObject({ isError: true, toolName: 'write_file' });
    expect(denial.content).toContain('the notes are fine as they are');
    const requests = requestsOf(a, b);
    expect(resultsById(requests.at(-1)!).get('call_1_2')).toEqual(denial);
    expect(requests.filter((r) => !providerValid(r))).toEqual([]);
    const db = await stored(session);
    expect(db.messages).toEqual(messages);
    expect(db.journal).toEqual([]);
  });

  it('a decision recorded in process B before it is SIGKILLed is not asked for again in process C', async () => {
    const session = newSession();
    const a = await startAndStop(session, 'close');
    // B decides the report, then dies while the notes call still waits.
    const b = await phase(session, { phase: 'decide', after: 'kill', decisions: [{ type: 'approve', toolCallId: 'call_1_1' }] });
    expect(tagged(b, 'WAITING')).toEqual(['call_1_1', 'call_1_2']);
    // An approved call runs at once, without waiting for the other decision: by the kill it has run.
    expect(Object.fromEntries(effects(session))).toEqual({ call_1_0: 1, call_1_1: 1 });

    const c = await phase(session, { phase: 'decide', after: 'finish', decisions: [{ type: 'deny', toolCallId: 'call_1_2' }] });
    expect(tagged(c, 'STATE')).toEqual(AWAITING);
    // The stored decision names the digest of the call it was made for (issue 26: bound decisions).
    expect(tagged(c, 'DECIDED')).toEqual({ call_1_1: { approved: true, digest: expect.stringMatching(/^[0-9a-f]{64}$/) } });
    // C asks only for the call nobody decided.
    expect(tagged(c, 'ASKED')).toEqual([['call_1_2']]);
    expect(tagged(c, 'ASKED_TOTAL')).toEqual([['call_1_2']]);
    expect(tagged<Outcome>(c, 'DONE')).toEqual({ type: 'Completed', finalText: 'Done (call_1_0=ok call_1_1=ok call_1_2=error).' });
    expect(Object.fromEntries(effects(session))).toEqual({ call_1_0: 1, call_1_1: 1 });
    expect(requestsOf(a, b, c).filter((r) => !providerValid(r))).toEqual([]);
  });

  it('"always" decided in process B is remembered for the rest of the session: a new run in process C asks nothing', async () => {
    const session = newSession();
    const a = await startAndStop(session, 'kill');
    // Approving the report with always decides the notes too (same tool).
    const b = await phase(session, {
      phase: 'decide',
      after: 'finish',
      decisions: [{ type: 'approve', toolCallId: 'call_1_1', always: true }],
    });
    expect(tagged(b, 'ASKED_TOTAL')).toEqual([['call_1_1', 'call_1_2']]);
    expect(tagged<Outcome>(b, 'DONE')).toEqual({ type: 'Completed', finalText: 'Done (call_1_0=ok call_1_1=ok call_1_2=ok).' });

    const c = await phase(session, { phase: 'prompt', after: 'finish' });
    expect(tagged<Outcome>(c, 'DONE')).toEqual({ type: 'Completed', finalText: 'Done (call_3_0=ok call_3_1=ok call_3_2=ok).' });
    expect(tagged(c, 'ASKED_TOTAL')).toEqual([]);
    expect(Object.fromEntries(effects(session))).toEqual({ call_1_0: 1, call_1_1: 1, call_1_2: 1, call_3_0: 1, call_3_1: 1, call_3_2: 1 });
    expect(requestsOf(a, b, c).filter((r) => !providerValid(r))).toEqual([]);
    const db = await stored(session);
    expect((db.state as { approvals: { standing: unknown } }).approvals.standing).toEqual({ write_file: 'approve' });
  });
});

describe('steering survives a crash', () => {
  it('a steer sent while the model call is in flight, then SIGKILL: the new process delivers it', async () => {
    const session = newSession();
    const a = await phase(session, { phase: 'steer', after: 'kill' });
    expect(tagged(a, 'STEERED')).toEqual([{ role: 'user', content: 'Also mention the open bugs.' }]);
    expect(requestsOf(a)).toHaveLength(1);

    const b = await phase(session, { phase: 'resume', after: 'finish' });
    expect(tagged<Outcome>(b, 'DONE')).toEqual({ type: 'Completed', finalText: 'Summary, with the open bugs.' });
    const messages = tagged<Message[]>(b, 'MESSAGES')!;
    expect(messages.slice(1)).toEqual([
      { role: 'user', content: 'Summarize the project.' },
      { role: 'assistant', content: 'Here is the summary.' },
      { role: 'user', content: 'Also mention the open bugs.' },
      { role: 'assistant', content: 'Summary, with the open bugs.' },
    ]);
    const requests = requestsOf(b);
    // The in-flight call is repeated (it never answered), then the steering message goes in, once.
    expect(requests).toHaveLength(2);
    expect(requests[1]!.at(-1)).toEqual({ role: 'user', content: 'Also mention the open bugs.' });
    expect([...requestsOf(a), ...requests].filter((r) => !providerValid(r))).toEqual([]);
    const db = await stored(session);
    expect(db.messages).toEqual(messages);
    expect((db.state as { brain: { context: { steering: unknown[] } } }).brain.context.steering).toEqual([]);
  });
});
