/**
 * One suite every store that holds schedules passes (memory, a SQLite file, PostgreSQL), shared by
 * test/schedules/{memory,sqlite,postgres}.test.ts (and their `.timed` twins, for the scenarios
 * that wait on the wall clock) as test/stores/conformance.ts is by the store suites: the API, bad input, the missed-tick and overlap policies, a claim that goes to one
 * caller across connections, ticks of schedules on one session in turn, a taken-over tick that
 * sends its input only if the run it started is stored, and rows checked when read (one bad row
 * reported, the others listed and fired).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { agentTool, createAgentMachine, DurableSession, type ModelRequest, type SessionStore } from '../../src/index.js';
import {
  deleteSchedule,
  InvalidCronError,
  InvalidScheduleError,
  listSchedules,
  pauseSchedule,
  resumeSchedule,
  schedule,
  ScheduleNotFoundError,
  startScheduler,
  UnknownScheduleAgentError,
  UnknownTimeZoneError,
  type Scheduler,
  type ScheduleTick,
} from '../../src/schedules.js';
import { agentMemory } from '../../src/memory.js';
import { SessionScopeError } from '../../src/sessions/durable-session.js';
import { scheduleBackend } from '../../src/schedules/schedules.js';
import { StoreError, StoreSchemaVersionError } from '../../src/stores/errors.js';
import { scriptedModel } from '../../src/testing.js';

/** Writes behind the backend's back (a hand edit, another version). */
export interface ScheduleRawAccess {
  /** Overwrites the stored row of schedule `id` with this JSON value, unchecked. */
  setRow(id: string, row: unknown): Promise<void>;
}

/** Writes to the tables of a store that has them (SQLite, PostgreSQL). */
export interface ScheduleTableAccess {
  /** Overwrites the stored text of schedule `id` (it need not be JSON). */
  setText(id: string, text: string): Promise<void>;
  /** Overwrites the schedules table's version in the store's meta. */
  setSchemaVersion(version: string): Promise<void>;
}

export interface ScheduleFixture {
  store: SessionStore;
  /** Another store over the same storage: another connection, as a second process would have. */
  sibling(): Promise<SessionStore>;
  raw: ScheduleRawAccess;
  tables?: ScheduleTableAccess | undefined;
}

export interface ScheduleHarness {
  /** A fresh, empty store; called once per test. */
  create(): Promise<ScheduleFixture>;
  /** After the whole suite (drop schemas, remove files). */
  cleanup?(): Promise<void>;
}

// The script is read by the count of assistant messages: one entry per run the tests make.
const answer = (request: ModelRequest) => ({ text: `done #${request.messages.filter((m) => m.role === 'user').length}` });
const quick = createAgentMachine({ model: scriptedModel([answer, answer, answer, answer]) });
const slow = createAgentMachine({ model: scriptedModel([{ text: 'slowly done', delayMs: 1_500 }, { text: 'slowly done', delayMs: 1_500 }, { text: 'slowly done', delayMs: 1_500 }]) });
// Runs long enough (300 ms) that two ticks on one session would overlap if they did not take turns.
const pacedAnswer = (request: ModelRequest) => ({ ...answer(request), delayMs: 300 });
const paced = createAgentMachine({ model: scriptedModel(Array.from({ length: 8 }, () => pacedAnswer)) });
const agents = { quick, slow, paced };

async function until(check: () => Promise<boolean>, ms = 10_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return check();
}
const userMessages = async (store: SessionStore, session: string) => (await store.load(session))?.messages.filter((m) => m.role === 'user').length ?? 0;
const transcript = async (store: SessionStore, session: string) => (await store.load(session))?.messages.map((m) => `${m.role}: ${String(m.content)}`) ?? [];
const allCompleted = async (store: SessionStore, ids: readonly string[]) =>
  (await listSchedules(store, { onUnreadable: () => {} })).filter((s) => ids.includes(s.id) && s.lastOutcome === 'Completed').length === ids.length;

/** One run of `session`, driven by hand (what a user or another process does beside the schedules). */
async function runByHand(store: SessionStore, session: string, input: string): Promise<void> {
  const opened = await DurableSession.open({ machine: quick, store, sessionId: session });
  try {
    opened.send({ type: 'input', message: input });
    await opened.whenIdle();
  } finally {
    await opened.close();
  }
}

/** What one test works with: its own store, and what it starts there, stopped and closed when it ends. */
interface ScheduleBench {
  /** The test's fresh store (one per test). */
  open(): Promise<SessionStore>;
  /** Another store over the test's storage. */
  sibling(): Promise<SessionStore>;
  /** Schedulers to stop when the test ends. */
  started(...schedulers: Scheduler[]): void;
  /** The test's fixture, once `open` made it. */
  fixture(): ScheduleFixture;
}

/**
 * `it` with the test's own store and schedulers (a fixture, not variables of the suite), so tests
 * that mostly wait on real time run side by side.
 */
function benchTest(harness: ScheduleHarness) {
  return it.extend<{ bench: ScheduleBench }>({
    // eslint-disable-next-line no-empty-pattern -- vitest reads a fixture's needs from this pattern
    bench: async ({}, use) => {
      const schedulers: Scheduler[] = [];
      const stores: SessionStore[] = [];
      let fixture: ScheduleFixture | undefined;
      const made = () => {
        if (!fixture) throw new Error('open() the store first');
        return fixture;
      };
      await use({
        async open() {
          fixture = await harness.create();
          stores.push(fixture.store);
          return fixture.store;
        },
        async sibling() {
          const store = await made().sibling();
          stores.push(store);
          return store;
        },
        started: (...more) => void schedulers.push(...more),
        fixture: made,
      });
      await Promise.all(schedulers.map((s) => s.stop()));
      await Promise.all(stores.map((s) => s.close()));
    },
  });
}

/** The suite, but for the scenarios {@link describeScheduleTimingConformance} holds. */
export function describeScheduleConformance(name: string, harness: ScheduleHarness): void {
  const test = benchTest(harness);
  describe.concurrent(`schedules on a ${name} store`, () => {
    afterAll(async () => {
      await harness.cleanup?.();
    });
    test('schedule, list, pause, resume and delete', async ({ bench: { open } }) => {
      const store = await open();
      const made = await schedule(store, { id: 'nightly', session: 'reports', agent: 'quick', input: 'Report.', cron: '0 2 * * *', timezone: 'Europe/Paris' });
      expect(made).toMatchObject({ id: 'nightly', session: 'reports', paused: false, runs: 0, lastOutcome: null, timing: { kind: 'cron', cron: '0 2 * * *' } });
      expect(new Date(made.nextAt!).getTime()).toBeGreaterThan(Date.now());
      // The list is oldest first by a millisecond clock (ties in id order): made in the same
      // millisecond, as a warm process can, 'hourly' would come first.
      await new Promise((resolve) => setTimeout(resolve, 2));
      await schedule(store, { id: 'hourly', session: 'pings', agent: 'quick', input: 'Ping.', every: 3_600_000 });
      expect((await listSchedules(store)).map((s) => s.id)).toEqual(['nightly', 'hourly']);
      expect((await pauseSchedule(store, 'hourly')).paused).toBe(true);
      expect((await resumeSchedule(store, 'hourly')).paused).toBe(false);
      await deleteSchedule(store, 'nightly');
      expect((await listSchedules(store)).map((s) => s.id)).toEqual(['hourly']);
      await expect(deleteSchedule(store, 'nightly')).rejects.toThrow(ScheduleNotFoundError);
      await expect(pauseSchedule(store, 'nope')).rejects.toThrow(ScheduleNotFoundError);
    });

    test('bad input is a typed error and stores nothing', async ({ bench: { open } }) => {
      const store = await open();
      const base = { session: 's', agent: 'quick', input: 'Go.' };
      await expect(schedule(store, { ...base, cron: '61 * * * *' })).rejects.toThrow(InvalidCronError);
      await expect(schedule(store, { ...base, cron: '0 2 * * *', timezone: 'Mars/Olympus' })).rejects.toThrow(UnknownTimeZoneError);
      await expect(schedule(store, { ...base, cron: '0 0 30 2 *' })).rejects.toThrow(/never matches/);
      await expect(schedule(store, base)).rejects.toThrow(/exactly one of at, every or cron/);
      await expect(schedule(store, { ...base, every: 1_000, cron: '* * * * *' })).rejects.toThrow(InvalidScheduleError);
      await expect(schedule(store, { ...base, every: 10 })).rejects.toThrow(InvalidScheduleError);
      await expect(schedule(store, { ...base, session: '', every: 1_000 })).rejects.toThrow(/session/);
      await expect(schedule(store, { ...base, at: 'tomorrow' as never })).rejects.toThrow(InvalidScheduleError);
      await expect(schedule(store, { ...base, every: 1_000, timezone: 'UTC' })).rejects.toThrow(/timezone goes with cron/);
      // An instant no Date holds (past ms 8.64e15), or before 1970, in each form `at` takes.
      await expect(schedule(store, { ...base, at: 8_640_000_000_000_001 })).rejects.toThrow(/at: must be an instant from 1970/);
      await expect(schedule(store, { ...base, at: 1.5 })).rejects.toThrow(InvalidScheduleError);
      await expect(schedule(store, { ...base, at: new Date(-1) })).rejects.toThrow(InvalidScheduleError);
      await expect(schedule(store, { ...base, at: '1969-12-31T23:59:59Z' })).rejects.toThrow(InvalidScheduleError);
      expect(await listSchedules(store)).toEqual([]);
      await schedule(store, { ...base, id: 'x', every: 1_000 });
      await expect(schedule(store, { ...base, id: 'x', every: 1_000 })).rejects.toThrow(/exists/);
      // The last instant a Date holds is one.
      expect((await schedule(store, { ...base, id: 'last', at: 8_640_000_000_000_000 })).nextAt!.getTime()).toBe(8_640_000_000_000_000);
      expect((await listSchedules(store)).map((s) => s.id).sort()).toEqual(['last', 'x']);
    });

    test('an id or agent name that cannot be a key (a lone surrogate, a control or bidi character) is refused: two ids never name one schedule', async ({ bench: { open } }) => {
      const store = await open();
      const base = { session: 's', agent: 'quick', input: 'Go.', every: 60_000 };
      await schedule(store, { ...base, id: 'nightly\ufffd' });
      // On PostgreSQL a lone surrogate is stored as U+FFFD: 'nightly\ud800' would be the schedule above.
      for (const id of ['nightly\ud800', 'nightly\udbff', 'a\u001b[2J', 'c\u202egnp', 'd\nfake']) {
        await expect(schedule(store, { ...base, id, session: 'other' })).rejects.toThrow(/invalid schedule: id: it holds/);
        await expect(schedule(store, { ...base, id: 'fine', agent: id })).rejects.toThrow(/invalid schedule: agent: it holds/);
      }
      // Found by id: a lone surrogate is refused (it would name the schedule above); any other id
      // is looked up as it is (a row an earlier version stored under it can still be deleted).
      for (const id of ['nightly\ud800', 'nightly\udbff']) {
        await expect(pauseSchedule(store, id)).rejects.toThrow(/invalid schedule: id: it holds a lone surrogate/);
        await expect(resumeSchedule(store, id)).rejects.toThrow(/invalid schedule: id: it holds a lone surrogate/);
        await expect(deleteSchedule(store, id)).rejects.toThrow(/invalid schedule: id: it holds a lone surrogate/);
      }
      await expect(deleteSchedule(store, 'a\u001b[2J')).rejects.toThrow(ScheduleNotFoundError);
      expect((await listSchedules(store)).map((s) => [s.id, s.paused])).toEqual([['nightly\ufffd', false]]);
    });

    test("a subagent's own session is refused as a schedule's session, and nothing is stored: a tick would run another agent inside it", async ({ bench: { open, started, fixture } }) => {
      const store = await open();
      const researcher = createAgentMachine({ model: scriptedModel([{ text: 'In China.' }]) });
      const coordinator = createAgentMachine({
        model: scriptedModel([{ toolCalls: [{ name: 'research', args: { task: 'Where was tea first drunk?' } }] }, { text: 'In China, it says.' }]),
        tools: [agentTool({ agent: researcher, name: 'research', description: 'Researches one question.' })],
      });
      const team = await DurableSession.open({ machine: coordinator, store, sessionId: 'team' });
      team.send({ type: 'input', message: 'Where was tea first drunk?' });
      expect((await team.whenIdle())?.outcome.type).toBe('Completed');
      await team.close();
      const child = (await store.list()).map((session) => session.sessionId).find((id) => id !== 'team');
      expect(child).toBe('team/run-1:turn-1:call_1_0');
      const base = { agent: 'quick', input: 'Report.', every: 60_000 };
      await expect(schedule(store, { ...base, id: 'child', session: child! })).rejects.toSatisfy((error: unknown) => InvalidScheduleError.isInstance(error));
      await expect(schedule(store, { ...base, id: 'child', session: child! })).rejects.toThrow(
        "invalid schedule: session: it is a subagent's session, driven by its parent's tool call: schedule the parent's session",
      );
      // The shape is what counts, a child of a session never run as well (a tick would make it).
      await expect(schedule(store, { ...base, id: 'deeper', session: 'team/run-1:turn-1:call_1_0/run-2:turn-1:a/b' })).rejects.toThrow(/subagent's session/);
      // The MCP server's own sessions (a served tool's conversation with one caller) likewise.
      await expect(schedule(store, { ...base, id: 'served', session: 'mcp/notes/0123456789abcdef01234567/name-x' })).rejects.toThrow(/MCP server's namespace/);
      expect(await listSchedules(store)).toEqual([]);
      expect((await store.load(child!))?.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
      // The parent's session, and an id with a '/' that is no child's, are sessions of their own.
      await schedule(store, { ...base, id: 'parent', session: 'team' });
      await schedule(store, { ...base, id: 'slashed', session: 'team/reports' });
      expect((await listSchedules(store)).map((s) => s.session).sort()).toEqual(['team', 'team/reports']);
      // A row stored before this rule (or by hand) that names the child: its tick fails, saying why, and runs nothing there.
      await schedule(store, { ...base, id: 'stored-child', session: 'placeholder', every: undefined, at: Date.now() });
      const backend = scheduleBackend(store);
      try {
        await fixture().raw.setRow('stored-child', { ...(await backend.get('stored-child')), sessionId: child });
      } finally {
        await backend.close();
      }
      const ticks: ScheduleTick[] = [];
      const errors: Error[] = [];
      started(await startScheduler({ store, agents, maxIdleMs: 100, onTick: (tick) => ticks.push(tick), onError: (error) => errors.push(error) }));
      expect(await until(async () => ticks.some((tick) => tick.scheduleId === 'stored-child'))).toBe(true);
      expect(ticks.find((tick) => tick.scheduleId === 'stored-child')).toMatchObject({ outcome: 'Failed', error: expect.stringMatching(/subagent's session/), nextAt: null });
      expect(errors.some((error) => InvalidScheduleError.isInstance(error))).toBe(true);
      expect((await store.load(child!))?.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    });

    test("a schedule's scope is its ticks' memory scope: the scheduled run recalls what the scope's other session kept; a session stored under another scope is not run", async ({ bench: { open, started, fixture } }) => {
      const store = await open();
      const memory = agentMemory({ store });
      try {
        // Monday, Ada talks to the agent in a session of her own: it keeps what it learnt.
        const monday = await DurableSession.open({
          machine: createAgentMachine({
            model: scriptedModel([{ toolCalls: [{ name: 'memory_update', args: { memory: 'Ada works on the Lovelace engine.' } }] }, { text: 'Noted.' }]),
            operations: [memory],
          }),
          store,
          sessionId: 'ada-monday',
          scope: 'user:ada',
        });
        monday.send({ type: 'input', message: 'My passport number is P1234567.' });
        expect((await monday.whenIdle())?.outcome.type).toBe('Completed');
        await monday.close();
        // Bob's digest session exists already, under his scope.
        await runByHand(store, 'bob-digest', 'Hello.');
        const bobs = await DurableSession.open({ machine: quick, store, sessionId: 'bob-scoped', scope: 'user:bob' });
        bobs.send({ type: 'input', message: 'Hello, I am Bob.' });
        await bobs.whenIdle();
        await bobs.close();

        const systems: string[] = [];
        const digest = createAgentMachine({
          model: scriptedModel(Array.from({ length: 4 }, () => (request: ModelRequest) => {
            systems.push(request.messages.filter((m) => m.role === 'system').map((m) => m.content).join('\n'));
            return { text: 'Your digest.' };
          })),
          operations: [memory],
        });
        // The scope is checked where it enters, as every scope is.
        for (const scope of ['', 'x'.repeat(201), 'user:a\ud800', 'user:\u001bada']) {
          await expect(schedule(store, { id: 'bad', session: 's', agent: 'digest', input: 'Go.', every: 60_000, scope })).rejects.toSatisfy((error: unknown) => InvalidScheduleError.isInstance(error) && /scope: /.test((error as Error).message));
        }
        const made = await schedule(store, { id: 'ada-nightly', session: 'ada-digest', agent: 'digest', input: 'What is my passport number?', at: Date.now(), scope: 'user:ada' });
        expect(made.scope).toBe('user:ada');
        // A schedule of Ada's on Bob's stored session: its tick is refused like a session it cannot open.
        await schedule(store, { id: 'on-bobs', session: 'bob-scoped', agent: 'digest', input: 'What is my passport number?', at: Date.now(), scope: 'user:ada' });
        // Nor on a session stored without a scope (it stays without one).
        await schedule(store, { id: 'on-unscoped', session: 'bob-digest', agent: 'digest', input: 'What is my passport number?', at: Date.now(), scope: 'user:ada' });
        // A row stored before schedules had a scope (no such field) is still read, and fires as before.
        await schedule(store, { id: 'unscoped', session: 'bob-digest', agent: 'quick', input: 'Again.', at: Date.now() });
        const backend = scheduleBackend(store);
        try {
          const stored = await backend.get('unscoped');
          expect(stored && 'scope' in stored).toBe(false);
          await fixture().raw.setRow('unscoped', stored);
        } finally {
          await backend.close();
        }
        const ticks: ScheduleTick[] = [];
        const errors: Error[] = [];
        started(await startScheduler({ store, agents: { ...agents, digest }, maxIdleMs: 100, onTick: (tick) => ticks.push(tick), onError: (error) => errors.push(error) }));
        expect(await until(async () => ['ada-nightly', 'on-bobs', 'on-unscoped', 'unscoped'].every((id) => ticks.some((tick) => tick.scheduleId === id)))).toBe(true);
        const tickOf = (id: string) => ticks.find((tick) => tick.scheduleId === id);
        expect(tickOf('ada-nightly')).toMatchObject({ outcome: 'Completed' });
        expect(tickOf('unscoped')).toMatchObject({ outcome: 'Completed' });
        // The scheduled run read Ada's memory, kept by another session: her working memory, and the recalled turn.
        expect(systems).toHaveLength(1);
        expect(systems[0]).toContain('Ada works on the Lovelace engine.');
        expect(systems[0]).toContain('My passport number is P1234567.');
        expect((await store.load('ada-digest'))?.state).toMatchObject({ scope: 'user:ada' });
        // Bob's session was not run: the tick Failed, saying it is another scope's without saying whose.
        expect(tickOf('on-bobs')).toMatchObject({ outcome: 'Failed', error: "the session could not be opened: session 'bob-scoped' belongs to another scope", nextAt: null });
        expect(errors.some((error) => SessionScopeError.isInstance(error))).toBe(true);
        expect(await transcript(store, 'bob-scoped')).toEqual(['user: Hello, I am Bob.', 'assistant: done #1']);
        expect((await listSchedules(store)).find((s) => s.id === 'on-bobs')).toMatchObject({ lastOutcome: 'Failed', runs: 0, nextAt: null });
        expect(tickOf('on-unscoped')).toMatchObject({ outcome: 'Failed', error: "the session could not be opened: session 'bob-digest' belongs to another scope" });
      } finally {
        await memory.close();
      }
    });

    test('a one-off fires once: it starts the session, then continues it on the next schedule; onTick hears each', async ({ bench: { open, started } }) => {
      const store = await open();
      const ticks: ScheduleTick[] = [];
      const scheduler = await startScheduler({ store, agents, maxIdleMs: 200, onTick: (tick) => ticks.push(tick) });
      started(scheduler);
      await schedule(store, { id: 'first', session: 'ticket-7', agent: 'quick', input: 'Check the ticket.', at: new Date() });
      scheduler.wake();
      expect(await until(async () => (await listSchedules(store))[0]?.lastOutcome === 'Completed')).toBe(true);
      const [fired] = await listSchedules(store);
      expect(fired).toMatchObject({ runs: 1, nextAt: null, lastError: null, firingBy: null });
      await schedule(store, { id: 'second', session: 'ticket-7', agent: 'quick', input: 'Check it again.', at: Date.now() });
      scheduler.wake();
      expect(await until(async () => (await listSchedules(store))[1]?.lastOutcome === 'Completed')).toBe(true);
      const stored = await store.load('ticket-7');
      expect(stored?.messages.map((m) => `${m.role}: ${String(m.content)}`)).toEqual(['user: Check the ticket.', 'assistant: done #1', 'user: Check it again.', 'assistant: done #2']);
      expect(ticks.map(({ scheduleId, session, agent, outcome, error, nextAt }) => ({ scheduleId, session, agent, outcome, error, nextAt }))).toEqual([
        { scheduleId: 'first', session: 'ticket-7', agent: 'quick', outcome: 'Completed', error: null, nextAt: null },
        { scheduleId: 'second', session: 'ticket-7', agent: 'quick', outcome: 'Completed', error: null, nextAt: null },
      ]);
    });

    test("a missed tick (older than missedAfterMs): 'skip' does not run it, 'run-once' runs it once", async ({ bench: { open, started } }) => {
      const store = await open();
      const past = Date.now() - 60_000;
      await schedule(store, { id: 'skipped', session: 'a', agent: 'quick', input: 'Go.', at: past, missed: 'skip' });
      await schedule(store, { id: 'caught-up', session: 'b', agent: 'quick', input: 'Go.', at: past, missed: 'run-once' });
      started(await startScheduler({ store, agents, missedAfterMs: 5_000, maxIdleMs: 200 }));
      expect(await until(async () => (await listSchedules(store)).every((s) => s.lastOutcome !== null))).toBe(true);
      const byId = new Map((await listSchedules(store)).map((s) => [s.id, s]));
      const [skipped, caughtUp] = [byId.get('skipped'), byId.get('caught-up')];
      expect(skipped).toMatchObject({ lastOutcome: 'Missed', runs: 0, nextAt: null });
      expect(caughtUp).toMatchObject({ lastOutcome: 'Completed', runs: 1 });
      expect(await store.load('a')).toBeUndefined();
      expect(await userMessages(store, 'b')).toBe(1);
    });

    test('a paused schedule does not fire; resumed, it fires', async ({ bench: { open, started } }) => {
      const store = await open();
      await schedule(store, { id: 'p', session: 'p', agent: 'quick', input: 'Go.', at: Date.now(), paused: true });
      const scheduler = await startScheduler({ store, agents, maxIdleMs: 100 });
      started(scheduler);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect((await listSchedules(store))[0]!.runs).toBe(0);
      await resumeSchedule(store, 'p');
      scheduler.wake();
      expect(await until(async () => (await listSchedules(store))[0]!.runs === 1)).toBe(true);
    });

    test('a schedule for an agent the scheduler was not given is reported and left alone; the scheduler goes on', async ({ bench: { open, started } }) => {
      const store = await open();
      await schedule(store, { id: 'ghost', session: 'g', agent: 'ghost', input: 'Boo.', at: Date.now() });
      await schedule(store, { id: 'real', session: 'r', agent: 'quick', input: 'Go.', at: Date.now() });
      const errors: Error[] = [];
      started(await startScheduler({ store, agents, maxIdleMs: 100, onError: (error) => errors.push(error) }));
      expect(await until(async () => (await listSchedules(store))[1]!.runs === 1)).toBe(true);
      expect(errors.some((error) => UnknownScheduleAgentError.isInstance(error) && error.agent === 'ghost')).toBe(true);
      expect((await listSchedules(store))[0]).toMatchObject({ runs: 0, firingBy: null });
    });

    test('stop({ graceMs }) lets a run still going go: its lease given back at once, the next scheduler continues the run, the input sent once', async ({ bench: { open, sibling, started } }) => {
      const store = await open();
      const held = createAgentMachine({ model: scriptedModel([{ text: 'never', delayMs: 30_000 }]) });
      const ticks: ScheduleTick[] = [];
      const first = await startScheduler({ store, agents: { held }, maxIdleMs: 100, onTick: (tick) => ticks.push(tick) });
      await schedule(store, { id: 'held', session: 'h', agent: 'held', input: 'Take your time.', at: Date.now() });
      first.wake();
      expect(await until(async () => (await userMessages(store, 'h')) === 1)).toBe(true);
      const stopping = Date.now();
      await first.stop({ graceMs: 50 });
      expect(Date.now() - stopping).toBeLessThan(5_000);
      expect(ticks.map((tick) => tick.outcome)).toEqual(['Released']);
      expect((await listSchedules(store))[0]).toMatchObject({ firingBy: null, runs: 0, lastOutcome: null });
      const other = await sibling();
      const second = await startScheduler({ store: other, agents: { held: quick }, maxIdleMs: 100 });
      started(second);
      expect(await until(async () => (await listSchedules(store))[0]!.lastOutcome === 'Completed')).toBe(true);
      expect((await listSchedules(store))[0]).toMatchObject({ runs: 1, nextAt: null });
      expect((await store.load('h'))!.messages.map((m) => `${m.role}: ${String(m.content)}`)).toEqual(['user: Take your time.', 'assistant: done #1']);
      await expect(second.stop({ grace: 1 } as never)).rejects.toThrow(/unknown option "grace" — did you mean "graceMs"\?/);
    });

    test('a claim goes to one caller: two connections claiming the same due schedules at once never both take one', async ({ bench: { open, sibling } }) => {
      const store = await open();
      for (let i = 0; i < 12; i++) await schedule(store, { id: `due-${i}`, session: `s${i}`, agent: 'quick', input: 'Go.', at: Date.now() - 1_000 });
      const [a, b] = [scheduleBackend(store), scheduleBackend(await sibling())];
      try {
        const taken: string[] = [];
        // Rounds of two claims at once, three schedules each at most, until none is left due.
        for (let round = 0; round < 12; round++) {
          const now = Date.now();
          const claims = await Promise.all([a.claim('a', now, 60_000, ['quick'], 3), b.claim('b', now, 60_000, ['quick'], 3)]);
          taken.push(...claims.flatMap((claim) => claim.claimed.map((row) => row.id)));
          if (claims.every((claim) => claim.claimed.length === 0)) break;
        }
        expect([...taken].sort()).toEqual(Array.from({ length: 12 }, (_, i) => `due-${i}`).sort());
        // Leased: neither claims again until the lease ends; the holder ends its tick, the other cannot.
        expect(await a.claim('a', Date.now(), 60_000, ['quick'], 20)).toEqual({ claimed: [], unreadable: [], waiting: 0 });
        const [first] = await listSchedules(store);
        const holder = first!.firingBy!;
        const other = holder === 'a' ? 'b' : 'a';
        const end = { nextAt: null, lastFiredAt: Date.now(), lastOutcome: 'Completed', lastError: null, ran: 1 };
        expect(await a.endTick(first!.id, other, end, Date.now())).toBe(false);
        expect(await b.endTick(first!.id, holder, end, Date.now())).toBe(true);
        expect((await listSchedules(store))[0]).toMatchObject({ firingBy: null, runs: 1, lastOutcome: 'Completed' });
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    });

    test('a tick taken over sends its input unless the run it started is stored: a run another writer started since does not count', async ({ bench: { open, started } }) => {
      const store = await open();
      await runByHand(store, 'reports', 'Hello.');
      await schedule(store, { id: 'two', session: 'reports', agent: 'quick', input: 'Report B.', at: Date.now() });
      // A scheduler claimed the tick and recorded it (run count 1 before its input), then died before the input was stored.
      const backend = scheduleBackend(store);
      try {
        const { claimed } = await backend.claim('dead', Date.now(), 1, ['quick'], 1);
        expect(await backend.startTick('two', 'dead', claimed[0]!.nextAt!, 1)).toBe(true);
      } finally {
        await backend.close();
      }
      // Meanwhile run 2 is started by someone else: the run count moved, but not by this tick.
      await runByHand(store, 'reports', 'Something else.');
      started(await startScheduler({ store, agents, maxIdleMs: 100 }));
      expect(await until(() => allCompleted(store, ['two']))).toBe(true);
      expect(await transcript(store, 'reports')).toEqual([
        'user: Hello.',
        'assistant: done #1',
        'user: Something else.',
        'assistant: done #2',
        'user: Report B.',
        'assistant: done #3',
      ]);
    });

    // Alone: it listens for the process's next warning.
    test.sequential('one stored row this version does not read: the list gives the others and reports it; the scheduler reports it once and fires the others', async ({ bench: { open, started, fixture } }) => {
      const store = await open();
      await schedule(store, { id: 'broken', session: 'b', agent: 'quick', input: 'Go.', at: Date.now() - 5_000 });
      await schedule(store, { id: 'good', session: 'g', agent: 'quick', input: 'Go.', at: Date.now() - 1_000 });
      const backend = scheduleBackend(store);
      try {
        // As a newer version, or a hand edit, would leave it: a field this version does not know.
        await fixture().raw.setRow('broken', { ...(await backend.get('broken')), note: 'edited by hand' });
      } finally {
        await backend.close();
      }
      const unreadable: Error[] = [];
      expect((await listSchedules(store, { onUnreadable: (error) => unreadable.push(error) })).map((s) => s.id)).toEqual(['good']);
      expect(unreadable).toHaveLength(1);
      expect(StoreError.isInstance(unreadable[0])).toBe(true);
      expect(unreadable[0]!.message).toMatch(/the stored schedule 'broken' is not one this version reads: .*note/s);
      const errors: Error[] = [];
      started(await startScheduler({ store, agents, maxIdleMs: 50, onError: (error) => errors.push(error) }));
      expect(await until(() => allCompleted(store, ['good']))).toBe(true);
      // Passes go on (every 50 ms at most); the bad row is told once.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(errors.map((error) => error.message)).toEqual([unreadable[0]!.message]);
      expect(await store.load('b')).toBeUndefined();
      // By default the list reports it as a process warning; deleting it is how it goes.
      const warned = new Promise<Error>((resolve) => process.once('warning', resolve));
      expect((await listSchedules(store)).map((s) => s.id)).toEqual(['good']);
      expect((await warned).message).toBe(unreadable[0]!.message);
      await deleteSchedule(store, 'broken');
      expect((await listSchedules(store)).map((s) => s.id)).toEqual(['good']);
    });

    test('a stored row this version does not read is a StoreError when read by id; a table of another version a StoreSchemaVersionError', async ({ bench: { open, sibling, fixture }, skip }) => {
      const store = await open();
      await schedule(store, { id: 'edited', session: 's', agent: 'quick', input: 'Go.', every: 60_000 });
      await fixture().raw.setRow('edited', { id: 'edited', sessionId: 's', nextAt: 'soon' });
      const error = await pauseSchedule(store, 'edited').catch((thrown: unknown) => thrown);
      expect(StoreError.isInstance(error) && (error as Error).message).toMatch(/the stored schedule 'edited' is not one this version reads/);
      const tables = fixture().tables;
      if (!tables) return skip();
      await tables.setText('edited', '{not json');
      await expect(pauseSchedule(store, 'edited')).rejects.toThrow(/not JSON/);
      await tables.setSchemaVersion('99');
      await expect(listSchedules(await sibling())).rejects.toThrow(StoreSchemaVersionError);
    });
  });
}

/**
 * The scenarios that spend seconds waiting on the wall clock: runs of 0.3-1.5 s against the 1 s
 * shortest interval, and a lease taken over mid-run. Files that call this are `*.timed.test.ts`,
 * in their own project, so `npm run test:fast` does not sit through them.
 */
export function describeScheduleTimingConformance(name: string, harness: ScheduleHarness): void {
  const test = benchTest(harness);
  describe.concurrent(`schedules on a ${name} store, on the wall clock`, () => {
    afterAll(async () => {
      await harness.cleanup?.();
    });
    test("overlap 'skip': ticks due while the run goes are dropped; 'queue': one runs right after", async ({ bench: { open, started } }) => {
      const store = await open();
      await schedule(store, { id: 'drop', session: 'd', agent: 'slow', input: 'Go.', every: 1_000, overlap: 'skip' });
      await schedule(store, { id: 'queue', session: 'q', agent: 'slow', input: 'Go.', every: 1_000, overlap: 'queue' });
      const scheduler = await startScheduler({ store, agents, maxIdleMs: 200 });
      started(scheduler);
      // Each run takes 1.5 s against a 1 s interval: every tick after the first comes while a run goes.
      expect(await until(async () => (await listSchedules(store)).every((s) => s.runs >= 1), 8_000)).toBe(true);
      await scheduler.stop();
      const [drop, queue] = await listSchedules(store);
      const anchor = (info: typeof drop) => (info!.timing as { anchor: number }).anchor;
      // skip: the next tick is the first one on the interval's grid after the run ended (the one during it was dropped).
      expect((drop!.nextAt!.getTime() - anchor(drop)) % 1_000).toBe(0);
      expect(drop!.nextAt!.getTime() - drop!.lastFiredAt!.getTime()).toBeGreaterThanOrEqual(1_500);
      // queue: the tick due during the run fires as it ends, off the grid.
      expect((queue!.nextAt!.getTime() - anchor(queue)) % 1_000).not.toBe(0);
      expect(queue!.lastOutcome).toBe('Completed');
    }, 20_000);

    test('two schedules on one session take turns: each tick sends its input once, on a new session and on one that exists', async ({ bench: { open, started } }) => {
      const store = await open();
      const errors: Error[] = [];
      started(await startScheduler({ store, agents, maxIdleMs: 100, onError: (error) => errors.push(error) }));
      const due = Date.now();
      await schedule(store, { id: 'one', session: 'reports', agent: 'paced', input: 'Report A.', at: due });
      await schedule(store, { id: 'two', session: 'reports', agent: 'paced', input: 'Report B.', at: due });
      expect(await until(() => allCompleted(store, ['one', 'two']))).toBe(true);
      const later = Date.now();
      await schedule(store, { id: 'three', session: 'reports', agent: 'paced', input: 'Report C.', at: later });
      await schedule(store, { id: 'four', session: 'reports', agent: 'paced', input: 'Report D.', at: later });
      expect(await until(() => allCompleted(store, ['three', 'four']))).toBe(true);
      expect(errors).toEqual([]);
      expect((await listSchedules(store)).map((s) => s.runs)).toEqual([1, 1, 1, 1]);
      // Each run whole before the next input; two made together are taken in the order made, or the
      // other (the scheduler may take the first before the second is made).
      const lines = await transcript(store, 'reports');
      expect(lines.filter((_, i) => i % 2 === 1)).toEqual(['assistant: done #1', 'assistant: done #2', 'assistant: done #3', 'assistant: done #4']);
      expect(lines.slice(0, 4).filter((line) => line.startsWith('user:')).sort()).toEqual(['user: Report A.', 'user: Report B.']);
      expect(lines.slice(4).filter((line) => line.startsWith('user:')).sort()).toEqual(['user: Report C.', 'user: Report D.']);
    });

    test('two schedulers on two connections, two schedules on one session: they take turns, each input sent once, no conflict', async ({ bench: { open, sibling, started } }) => {
      const store = await open();
      const other = await sibling();
      const errors: Error[] = [];
      await schedule(store, { id: 'one', session: 'shared', agent: 'paced', input: 'Report A.', at: Date.now() });
      await schedule(store, { id: 'two', session: 'shared', agent: 'paced', input: 'Report B.', at: Date.now() });
      started(...(await Promise.all([store, other].map((on) => startScheduler({ store: on, agents, maxIdleMs: 100, onError: (error) => errors.push(error) })))));
      expect(await until(() => allCompleted(store, ['one', 'two']))).toBe(true);
      expect(errors).toEqual([]);
      expect([...(await transcript(store, 'shared'))].filter((line) => line.startsWith('user:')).sort()).toEqual(['user: Report A.', 'user: Report B.']);
      expect(await transcript(store, 'shared')).toHaveLength(4);
    });

    test('a tick whose session another writer moves on mid-run is given back and taken over at once (not when its lease ends), its input sent once', async ({ bench: { open, started } }) => {
      const store = await open();
      const errors: Error[] = [];
      // One model call of 800 ms: the other writer steps in while it goes.
      const contested = createAgentMachine({ model: scriptedModel([{ text: 'done', delayMs: 800 }]) });
      started(await startScheduler({ store, agents: { contested }, maxIdleMs: 100, onError: (error) => errors.push(error) }));
      await schedule(store, { id: 'c', session: 'contested', agent: 'contested', input: 'Go.', at: Date.now() });
      expect(await until(async () => (await userMessages(store, 'contested')) === 1)).toBe(true);
      const stored = (await store.load('contested'))!;
      await store.apply('contested', { expectedVersion: stored.version, state: stored.state });
      const moved = Date.now();
      // The default lease is 30 s: a tick left to it would not be done in 10.
      expect(await until(() => allCompleted(store, ['c']))).toBe(true);
      expect(Date.now() - moved).toBeLessThan(10_000);
      expect(errors.map((error) => error.name)).toContain('SessionBusyError');
      expect((await listSchedules(store))[0]).toMatchObject({ runs: 1, firingBy: null });
      expect(await transcript(store, 'contested')).toEqual(['user: Go.', 'assistant: done']);
    });
  });
}
