/**
 * The crash test (issue 5): a real child process runs a durable session (scripted model, two
 * runs, parallel tool batches of two and three calls, tools whose side effect is a line in a
 * file) and the parent SIGKILLs it at one exact point: the k-th marker of an uninterrupted run,
 * for EVERY k (before and after each model call, tool side effect, journal write and step
 * commit), found by its label (parallel calls may order their markers a little differently). A new process then resumes the session and runs it to completion. Then:
 *
 *  - the stored transcript (the log) and the state row equal those of an uninterrupted run:
 *    no message lost, none duplicated, no usage counted twice;
 *  - each tool side effect happened exactly once per tool call id, except calls in flight at
 *    the kill: a call whose side effect was done and whose result's write had not started ran
 *    exactly once more (per kill), one whose write was on its way at most once more (the
 *    result's write is its journal entry, or for a batch's last result the step that logs it);
 *    every run of a call carried the same idempotency key `<sessionId>:<toolCallId>`;
 *  - the tool journal is empty once the results are in the log.
 *
 * Plus double kills: a second kill while a new process resumes (a crash during recovery).
 * Against SQLite (a file per kill point) and PostgreSQL (when DATABASE_URL is set).
 *
 * The series is cut into PARTS files (test/sessions/series-<n>.crash.test.ts), so the kill points run
 * on every worker at once instead of one after another in a single file: part i kills at every
 * PARTS-th point of each kind (model call, side effect, journal write, commit; from the i-th on)
 * and takes every PARTS-th double kill; together the parts cover every kill point. Each part makes its own uninterrupted reference run (one child).
 *
 * To keep the run short, one child process resumes the previous kill point's session and then
 * starts the next one's fresh session (the one it gets killed in): every resume still happens
 * first thing in a process that has never seen that session. Children run one at a time, as an
 * esbuild bundle of fixtures/crash-child.ts (about 0.5 s of CPU for a whole uninterrupted run,
 * where tsx's loader alone takes about 0.55 s; LOOPCHART_TEST_TSX=1 runs them with `node --import
 * tsx` instead).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { PostgresSessionStore } from '../../src/stores/postgres.js';
import type { SessionStore, StoredSession } from '../../src/stores/session-store.js';
import { replaySession } from '../../src/sessions/replay.js';
import type { CrashPhase, CrashTask } from '../sessions/fixtures/crash-child.js';
import { bundledCommand, runNode, type ChildRun, type NodeCommand } from '../sessions/fixtures/processes.js';
import type { StoreSpec } from '../sessions/fixtures/stores.js';

const CHILD = fileURLToPath(new URL('../sessions/fixtures/crash-child.ts', import.meta.url));

/** How many files the series is cut into. */
export const PARTS = 3;

interface Marker {
  phase: string;
  n: number;
  label: string;
}

const markersOf = (run: ChildRun): Marker[] =>
  run.lines.flatMap((line) => {
    const match = /^(\w+) (\d+) (.+)$/.exec(line);
    return match && match[1] !== 'DONE' ? [{ phase: match[1]!, n: Number(match[2]), label: match[3]! }] : [];
  });

/**
 * How many extra runs a kill allows per tool call. A call whose side effect happened but whose
 * result's write (journal entry or logging step) had not started MUST run once more (nothing
 * recorded its result); one whose write was sent but not acknowledged MAY (PostgreSQL commits a statement it received
 * even if the client dies before reading the reply).
 */
type Reruns = Map<string, { must: number; may: number }>;

function rerunsAfterKill(markers: Marker[], into: Reruns = new Map()): Reruns {
  const state = new Map<string, 'effected' | 'journaling' | 'journaled'>();
  for (const { label } of markers) {
    const [what, id, logged] = label.split(' ') as [string, string, string | undefined];
    if (what === 'tool:after') state.set(id, 'effected');
    if (what === 'journal:before') state.set(id, 'journaling');
    if (what === 'journal:after') state.set(id, 'journaled');
    // A batch's last result has no journal write: the step that logs it records it.
    for (const call of logged?.replace(/^results=/, '').split(',') ?? []) {
      if (what === 'apply:before' && state.get(call) === 'effected') state.set(call, 'journaling');
      if (what === 'apply:after' && state.has(call)) state.set(call, 'journaled');
    }
  }
  for (const [id, where] of state) {
    if (where === 'journaled') continue;
    const entry = into.get(id) ?? { must: 0, may: 0 };
    if (where === 'effected') entry.must++;
    else entry.may++;
    into.set(id, entry);
  }
  return into;
}

/** `<toolCallId> <idempotencyKey>` lines of the side-effect file, counted per call. */
function sideEffects(path: string): Map<string, string[]> {
  let text = '';
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    // no tool ran
  }
  const byCall = new Map<string, string[]>();
  for (const line of text.split('\n').filter(Boolean)) {
    const [id, key] = line.split(' ');
    byCall.set(id!, [...(byCall.get(id!) ?? []), key!]);
  }
  return byCall;
}

interface Reference {
  session: StoredSession;
  markers: Marker[];
  calls: string[];
}

interface Backend {
  name: string;
  spec(k: string): StoreSpec;
  sessionId(k: string): string;
  /** A store to inspect session `k` with (closed by the caller through `done`). */
  inspect(k: string): Promise<{ store: SessionStore; done(): Promise<void> }>;
}

/** The state row without the one clock reading it holds (when the last run started). */
type StoredAttempt = { attempt?: { key: string; attempt: number } };
/**
 * The row as the reference must match it. A model call cut off by a kill is made again as a new
 * attempt (delivery ids: its text streams under new ids), so the attempt's number may be higher
 * than the reference's, never lower (checked in `check`); its key must agree once the session id
 * it starts with is set aside (the PostgreSQL series names each session after its kill point).
 */
const comparable = (state: unknown, sessionId: string) => {
  const { attempt } = state as StoredAttempt;
  const key = attempt?.key.startsWith(`${sessionId}:`) ? `<session>${attempt.key.slice(sessionId.length)}` : attempt?.key;
  return { ...(state as object), runStartedAt: 'any', ...(attempt && { attempt: { key } }) };
};
const attemptOf = (state: unknown) => (state as StoredAttempt).attempt?.attempt ?? 0;

/** Kills during recovery: die in the fresh session at k, then again while resuming it at j. (Comments: the points in the reference order.) */
const CHAINS: Array<[number, number]> = [
  [14, 3], // all three side effects of batch 1 done, none journaled; die again while re-running them
  [16, 2], // one journaled; die again after re-running another
  [20, 1], // batch 1's results committed; die again before the next model call
  [28, 4], // both side effects of batch 2 done; die again after re-running both
  [50, 2], // run 1's final reply received, not stored; die again with it received again
  [54, 3], // run 2's prompt committed; die again as it calls for its first model reply
  [62, 5], // run 2's batch done, not journaled; die again while journaling the re-run
];

/** The point kinds every series must hit many times over: model calls, side effects, journal writes, commits. */
const KINDS = ['model:before', 'model:after', 'tool:before', 'tool:after', 'journal:before', 'journal:after', 'apply:before', 'apply:after'];

const kindOf = (label: string) => label.split(' ')[0]!;

/**
 * Part `part` (0-based, of PARTS) of the series, as a describe block: the SQLite series, and the
 * PostgreSQL one when DATABASE_URL is set.
 */
export function crashSuite(part: number): void {
  let command: NodeCommand;
  const root = mkdtempSync(join(tmpdir(), `loopchart-crash-${part}-`));
  beforeAll(async () => {
    command = await bundledCommand(CHILD);
  });
  afterAll(() => {
    command?.dispose();
    rmSync(root, { recursive: true, force: true });
  });

  /** Runs one child; with `killAt`, SIGKILLs it the moment it reports PAUSED. */
  async function child(task: CrashTask, killAt?: { phase: 'fresh' | 'resume'; at: number; label?: string }): Promise<ChildRun> {
    const run = await runNode([...command.args, JSON.stringify(task)], {
      env: { KILL_AT: killAt ? String(killAt.at) : undefined, KILL_LABEL: killAt?.label, KILL_PHASE: killAt?.phase },
      onLine: (line) => (line === 'PAUSED' ? 'kill' : undefined),
    });
    const paused = run.lines.includes('PAUSED');
    if (killAt) {
      if (!paused || run.signal !== 'SIGKILL') {
        throw new Error(`child was to be killed at ${killAt.phase} marker ${killAt.label ?? killAt.at} but ended with ${run.code ?? run.signal}: ${run.stderr}`);
      }
    } else if (run.code !== 0) {
      throw new Error(`child failed (${run.code ?? run.signal}): ${run.stderr}`);
    }
    // The phases that ran before the kill point (all of them without one) must have finished.
    const finished = killAt?.phase === 'resume' ? [] : killAt ? ['resume'] : ['resume', 'fresh'];
    for (const phase of finished as Array<'resume' | 'fresh'>) {
      if (task[phase] && !run.lines.some((line) => line.startsWith(`DONE ${phase} `))) {
        throw new Error(`child did not finish its ${phase} phase: ${run.stderr}`);
      }
    }
    return run;
  }

  /** Replay over every session of the series (issue 14): decisions checked, and the time it took. */
  const replayed = { sessions: 0, decisions: 0, ms: 0 };

  /** The brain re-run over the session's trace must take every recorded decision. */
  async function replayProblems(store: SessionStore, k: string, sessionId: string): Promise<string[]> {
    const report = await replaySession(store, sessionId);
    replayed.sessions++;
    replayed.decisions += report.decisions.length;
    replayed.ms += report.ms;
    const d = report.divergence;
    // Two runs of the script: 6 model calls, 4 tool batches, 2 outcomes.
    if (!d && report.decisions.length !== 12) return [`${k}: replay checked ${report.decisions.length} decisions, expected 12`];
    return d ? [`${k}: replay diverges at step ${d.step}: expected ${d.expected}, got ${d.got}`] : [];
  }

  /** Checks the session a resumed process finished against the reference; returns the problems found. */
  async function check(backend: Backend, k: string, reference: Reference, reruns: Reruns): Promise<string[]> {
    const problems: string[] = [];
    const sessionId = backend.sessionId(k);
    const { store, done } = await backend.inspect(k);
    try {
      const session = await store.load(sessionId);
      if (!session) return [`${k}: session missing`];
      try {
        expect(session.messages).toEqual(reference.session.messages);
      } catch {
        problems.push(`${k}: transcript differs: ${JSON.stringify(session.messages.map((m) => m.role + ':' + ('toolCallId' in m ? m.toolCallId : m.content.slice(0, 12))))}`);
      }
      try {
        expect(comparable(session.state, sessionId)).toEqual(comparable(reference.session.state, backend.sessionId('ref')));
      } catch {
        problems.push(`${k}: state row differs: ${JSON.stringify(session.state)}`);
      }
      if (attemptOf(session.state) < attemptOf(reference.session.state)) {
        problems.push(`${k}: fewer model call attempts than the uninterrupted run: ${JSON.stringify(session.state)}`);
      }
      problems.push(...(await replayProblems(store, k, sessionId)));
      const toolIds = session.messages.flatMap((m) => (m.role === 'tool' ? [m.toolCallId] : []));
      if (new Set(toolIds).size !== toolIds.length) problems.push(`${k}: a tool result is duplicated`);
      for (let run = 1; run <= 2; run++) {
        for (let turn = 1; turn <= 4; turn++) {
          const left = await store.journaledToolResults(sessionId, `${sessionId}:run-${run}:turn-${turn}:tools`);
          if (left.length > 0) problems.push(`${k}: journal run ${run} turn ${turn} still holds ${left.length} result(s)`);
        }
      }
    } finally {
      await done();
    }
    const effects = sideEffects(join(root, `${backend.name}-${k}.effects`));
    for (const id of reference.calls) {
      const keys = effects.get(id) ?? [];
      const { must, may } = reruns.get(id) ?? { must: 0, may: 0 };
      if (keys.length < 1 + must || keys.length > 1 + must + may) {
        problems.push(`${k}: ${id} ran ${keys.length} time(s), expected ${1 + must}${may ? `..${1 + must + may}` : ''}`);
      }
      // The executor's key for a tool call: the session, the run, the turn's batch and the call.
      const keyShape = new RegExp(`^${sessionId}:run-\\d+:turn-\\d+:tools:${id}$`);
      if (keys.some((key) => !keyShape.test(key))) problems.push(`${k}: ${id} ran with keys ${keys.join(', ')}`);
    }
    for (const id of effects.keys()) if (!reference.calls.includes(id)) problems.push(`${k}: unexpected call ${id}`);
    return problems;
  }

  function crashSeries(backend: Backend) {
    return async () => {
      const started = performance.now();
      const phase = (k: string): CrashPhase => ({
        store: backend.spec(k),
        sessionId: backend.sessionId(k),
        effects: join(root, `${backend.name}-${k}.effects`),
      });

      // The uninterrupted run: the transcript, state row and marker sequence every kill is compared with.
      const plain = await child({ fresh: phase('ref') });
      const markers = markersOf(plain);
      const { store, done } = await backend.inspect('ref');
      const session = (await store.load(backend.sessionId('ref')))!;
      expect(await replayProblems(store, 'ref', backend.sessionId('ref'))).toEqual([]);
      await done();
      const calls = [...sideEffects(join(root, `${backend.name}-ref.effects`)).keys()].sort();
      const reference: Reference = { session, markers, calls };
      const total = markers.length;
      expect(total).toBeGreaterThanOrEqual(50);
      expect(calls).toHaveLength(10);
      expect(session.messages.filter((m) => m.role === 'tool')).toHaveLength(10);
      expect(markers.filter((m) => m.label.startsWith('model:'))).toHaveLength(12);
      expect(markers.filter((m) => m.label.startsWith('apply:')).length).toBeGreaterThanOrEqual(24);
      // Every kind of point is there many times over in the series the parts kill at together.
      for (const kind of KINDS) expect(markers.filter((m) => kindOf(m.label) === kind).length, kind).toBeGreaterThanOrEqual(5);

      // This part's kill points. Child k resumes the part's previous session first, then dies in session k.
      const problems: string[] = [];
      const kinds = new Map<string, number>();
      let moved = 0;
      let previous: { k: string; reruns: Reruns } | undefined;
      const finishPrevious = async () => {
        if (previous) problems.push(...(await check(backend, previous.k, reference, previous.reruns)));
      };
      // Every PARTS-th point of each kind, so that each part kills at every kind of point.
      const seen = new Map<string, number>();
      const points = markers.flatMap((marker, i) => {
        const rank = seen.get(kindOf(marker.label)) ?? 0;
        seen.set(kindOf(marker.label), rank + 1);
        return rank % PARTS === part ? [i + 1] : [];
      });
      for (const k of points) {
        const killed = await child({ ...(previous && { resume: phase(previous.k) }), fresh: phase(`k${k}`) }, { phase: 'fresh', at: k, label: markers[k - 1]!.label });
        await finishPrevious();
        const fresh = markersOf(killed).filter((m) => m.phase === 'fresh');
        const last = fresh.at(-1)!;
        // Killed at the reference's k-th point by its label: parallel tools and journal writes may
        // interleave a little differently from the reference, so it may fall at another index.
        expect(last.label).toBe(markers[k - 1]!.label);
        if (last.n !== k) moved++;
        const kind = kindOf(last.label);
        kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
        previous = { k: `k${k}`, reruns: rerunsAfterKill(fresh) };
      }

      const chains = CHAINS.filter((_, i) => i % PARTS === part);
      for (const [k, j] of chains) {
        const id = `c${k}-${j}`;
        const first = await child({ ...(previous && { resume: phase(previous.k) }), fresh: phase(id) }, { phase: 'fresh', at: k });
        await finishPrevious();
        const second = await child({ resume: phase(id) }, { phase: 'resume', at: j });
        const reruns = rerunsAfterKill(markersOf(first).filter((m) => m.phase === 'fresh'));
        rerunsAfterKill(markersOf(second).filter((m) => m.phase === 'resume'), reruns);
        previous = { k: id, reruns };
      }
      const last = await child({ resume: phase(previous!.k) });
      expect(last.code).toBe(0);
      await finishPrevious();

      const seconds = (performance.now() - started) / 1000;
      console.log(
        `crash test part ${part + 1}/${PARTS} (${backend.name}, children via ${command.how}): ${points.length} of ${total} kill points ` +
          `(${[...kinds].map(([kind, n]) => `${n} ${kind}`).join(', ')}; ${moved} at another position than in the reference) + ` +
          `${chains.length} of ${CHAINS.length} double kills, ${seconds.toFixed(1)} s; replay: ${replayed.sessions} sessions, ` +
          `${replayed.decisions} decisions, ${Math.round(replayed.decisions / (replayed.ms / 1000))} steps/s`,
      );
      expect(problems).toEqual([]);
      // The part itself killed at every kind of point (the series as a whole many times over: above).
      for (const kind of KINDS) expect(kinds.get(kind) ?? 0, kind).toBeGreaterThanOrEqual(1);
    };
  }

  describe(`SIGKILL anywhere, resume in a new process (part ${part + 1} of ${PARTS})`, () => {
    it(
      'sqlite: every kill point resumes to the uninterrupted transcript, side effects once (twice only if in flight)',
      crashSeries({
        name: 'sqlite',
        spec: (k) => ({ kind: 'sqlite', path: join(root, `sqlite-${k}.db`) }),
        sessionId: () => 'crash',
        async inspect(k) {
          const path = join(root, `sqlite-${k}.db`);
          const store = new SqliteSessionStore({ path });
          return {
            store,
            async done() {
              await store.close();
              if (k !== 'ref') for (const suffix of ['', '-wal', '-shm']) rmSync(path + suffix, { force: true });
            },
          };
        },
      }),
      300_000,
    );

    const url = process.env.DATABASE_URL;
    describe.skipIf(!url)('postgres', () => {
      const schema = `lc_crash_${part}_${process.pid}_${Date.now().toString(36)}`;
      let store: PostgresSessionStore;
      beforeAll(() => {
        store = new PostgresSessionStore({ connectionString: url!, schema, max: 2 });
      });
      afterAll(async () => {
        await store?.close();
        const admin = new pg.Pool({ connectionString: url, max: 1 });
        await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await admin.end();
      });
      it(
        'every kill point resumes to the uninterrupted transcript, side effects once (twice only if in flight)',
        crashSeries({
          name: 'postgres',
          spec: () => ({ kind: 'postgres', url: url!, schema }),
          sessionId: (k) => `crash-${k}`,
          inspect: async () => ({ store, done: async () => {} }),
        }),
        300_000,
      );
    });
  });
}
