import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { bundledCommand, type NodeCommand } from '../sessions/fixtures/processes.js';
import type { Message, ToolMessage } from '../../src/schemas.js';
import {
  CorruptSessionError,
  InvalidSessionIdError,
  InvalidWriteError,
  MAX_SESSION_ID_LENGTH,
  SessionBusyError,
  SessionNotFoundError,
  StoreError,
  StoreSchemaVersionError,
} from '../../src/stores/errors.js';
import type { SessionStore } from '../../src/stores/session-store.js';
import type { ChildStoreSpec, ChildTask, ChildResult } from './fixtures/store-child.js';

/**
 * One suite every SessionStore must pass. A backend supplies a harness: how to get a fresh
 * empty store, a second instance over the same storage, and raw access to plant corrupt rows
 * behind the store's back (the way a bad migration, a manual edit or a foreign writer would).
 */

/** Writes that bypass every check of the store. */
export interface RawAccess {
  setMessage(sessionId: string, position: number, text: string): Promise<void>;
  deleteMessage(sessionId: string, position: number): Promise<void>;
  insertMessage(sessionId: string, position: number, text: string): Promise<void>;
  setState(sessionId: string, text: string): Promise<void>;
  setJournal(sessionId: string, turnKey: string, toolCallId: string, text: string): Promise<void>;
}

export interface StoreFixture {
  store: SessionStore;
  /** Another instance over the same storage: another connection, as a second process would have. */
  sibling(): Promise<SessionStore>;
  raw: RawAccess;
  /** Overwrites the stored schema version (stores that have one). */
  setSchemaVersion?(version: string): Promise<void>;
  /** How a child process opens the same storage (stores that can be shared across processes). */
  child?: ChildStoreSpec;
}

export interface StoreHarness {
  /** A fresh, empty store; called once per test. */
  create(): Promise<StoreFixture>;
  /** After the whole suite (drop schemas, remove files). */
  cleanup?(): Promise<void>;
}

const user = (content: string): Message => ({ role: 'user', content });
const assistant = (content: string, calls?: Array<{ id: string; name: string; args: unknown }>): Message =>
  calls ? { role: 'assistant', content, toolCalls: calls } : { role: 'assistant', content };
const toolResult = (toolCallId: string, content: string): ToolMessage => ({ role: 'tool', toolCallId, toolName: 'echo', content });

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

const CHILD = fileURLToPath(new URL('./fixtures/store-child.ts', import.meta.url));

/** Forks one child per task (`command`: the child's bundle); all open the store, then start together on 'go'. */
async function runChildren(command: NodeCommand, tasks: ChildTask[]): Promise<ChildResult[]> {
  const children = tasks.map((task) =>
    fork(command.args.at(-1)!, [JSON.stringify(task)], { execArgv: command.args.slice(0, -1), stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }),
  );
  const ready = children.map(
    (child) =>
      new Promise<void>((resolve, reject) => {
        child.once('message', () => resolve());
        child.once('exit', (code) => reject(new Error(`child exited with ${code} before it was ready`)));
      }),
  );
  await Promise.all(ready);
  const results = children.map(
    (child) =>
      new Promise<ChildResult>((resolve, reject) => {
        child.once('message', (message) => resolve(message as ChildResult));
        child.once('exit', (code) => reject(new Error(`child exited with ${code} without a result`)));
      }),
  );
  for (const child of children) child.send('go');
  try {
    return await Promise.all(results);
  } finally {
    for (const child of children) if (child.exitCode === null) child.kill();
  }
}

export function describeSessionStoreConformance(name: string, harness: StoreHarness): void {
  describe(`${name}: SessionStore conformance`, () => {
    const opened: SessionStore[] = [];
    let fixture: StoreFixture;

    async function setup(): Promise<SessionStore> {
      fixture = await harness.create();
      opened.push(fixture.store);
      return fixture.store;
    }
    async function sibling(): Promise<SessionStore> {
      const store = await fixture.sibling();
      opened.push(store);
      return store;
    }

    afterEach(async () => {
      for (const store of opened.splice(0)) await store.close();
    });
    afterAll(async () => {
      await harness.cleanup?.();
    });

    describe('round trips', () => {
      it('creates a session at version 1 and loads it back; an unknown id loads as undefined', async () => {
        const store = await setup();
        const messages: Message[] = [
          { role: 'system', content: 'be brief' },
          user('héllo 🌍 \u0000 "quoted" \\ back'),
          assistant('calling', [{ id: 'c1', name: 'echo', args: { nested: [1, { x: null }] } }]),
          { role: 'tool', toolCallId: 'c1', toolName: 'echo', content: 'ok', isError: true },
        ];
        const state = { phase: 'AwaitingModel', turnsTaken: 1, pending: [user('p')], nothing: null };
        expect(await store.apply('s1', { expectedVersion: 0, state, append: messages })).toBe(1);
        expect(await store.load('s1')).toEqual({ sessionId: 's1', version: 1, state, messages });
        expect(await store.load('nope')).toBeUndefined();
      });

      it('appends across steps; each step bumps the version by one', async () => {
        const store = await setup();
        let version = await store.apply('s', { expectedVersion: 0, state: { n: 0 }, append: [user('u0')] });
        for (let i = 1; i <= 4; i++) {
          version = await store.apply('s', { expectedVersion: version, state: { n: i }, append: [assistant(`a${i}`), user(`u${i}`)] });
        }
        expect(version).toBe(5);
        const loaded = await store.load('s');
        expect(loaded?.version).toBe(5);
        expect(loaded?.state).toEqual({ n: 4 });
        expect(loaded?.messages.map((m) => m.content)).toEqual(['u0', 'a1', 'u1', 'a2', 'u2', 'a3', 'u3', 'a4', 'u4']);
      });

      it('a step may write only the state row', async () => {
        const store = await setup();
        await store.apply('s', { expectedVersion: 0, state: 'a', append: [user('x')] });
        expect(await store.apply('s', { expectedVersion: 1, state: 'b' })).toBe(2);
        expect(await store.load('s')).toEqual({ sessionId: 's', version: 2, state: 'b', messages: [user('x')] });
      });

      it('truncates by position, then appends after the cut', async () => {
        const store = await setup();
        await store.apply('s', { expectedVersion: 0, state: 0, append: ['a', 'b', 'c', 'd'].map(user) });
        await store.apply('s', { expectedVersion: 1, state: 1, truncateTo: 2, append: [user('x')] });
        expect((await store.load('s'))?.messages.map((m) => m.content)).toEqual(['a', 'b', 'x']);
        await store.apply('s', { expectedVersion: 2, state: 2, truncateTo: 3 }); // at the end: nothing to drop
        await store.apply('s', { expectedVersion: 3, state: 3, truncateTo: 1 });
        expect((await store.load('s'))?.messages.map((m) => m.content)).toEqual(['a']);
        await store.apply('s', { expectedVersion: 4, state: 4, truncateTo: 0, append: [user('fresh')] });
        expect((await store.load('s'))?.messages.map((m) => m.content)).toEqual(['fresh']);
        expect((await store.list())[0]?.messageCount).toBe(1);
      });

      it('replaceLog swaps the whole log (compaction); later appends continue after it', async () => {
        const store = await setup();
        await store.apply('s', { expectedVersion: 0, state: 0, append: Array.from({ length: 30 }, (_, i) => user(`m${i}`)) });
        await store.apply('s', { expectedVersion: 1, state: 1, replaceLog: [{ role: 'system', content: 'summary' }, user('m29')] });
        await store.apply('s', { expectedVersion: 2, state: 2, append: [assistant('after')] });
        const loaded = await store.load('s');
        expect(loaded?.messages).toEqual([{ role: 'system', content: 'summary' }, user('m29'), assistant('after')]);
        expect((await store.list())[0]?.messageCount).toBe(3);
        await store.apply('s', { expectedVersion: 3, state: 3, replaceLog: [] });
        expect((await store.load('s'))?.messages).toEqual([]);
      });

      it('holds a long log and still appends to it', async () => {
        const store = await setup();
        const many = Array.from({ length: 2000 }, (_, i) => (i % 2 ? assistant(`a${i}`) : user(`u${i}`)));
        await store.apply('big', { expectedVersion: 0, state: {}, append: many });
        await store.apply('big', { expectedVersion: 1, state: {}, append: [user('last')] });
        const loaded = await store.load('big');
        expect(loaded?.messages).toHaveLength(2001);
        expect(loaded?.messages[1999]).toEqual(many[1999]);
        expect(loaded?.messages[2000]).toEqual(user('last'));
      });

      it('hands out copies: mutating what was written or loaded changes nothing stored', async () => {
        const store = await setup();
        const state = { list: [1, 2] };
        const append = [user('a')];
        await store.apply('s', { expectedVersion: 0, state, append });
        state.list.push(3);
        (append[0] as { content: string }).content = 'mutated';
        append.push(user('b'));
        const first = await store.load('s');
        expect(first?.state).toEqual({ list: [1, 2] });
        expect(first?.messages).toEqual([user('a')]);
        (first?.state as { list: number[] }).list.push(99);
        first?.messages.push(user('c'));
        (first?.messages[0] as { content: string }).content = 'changed';
        expect(await store.load('s')).toEqual({ sessionId: 's', version: 1, state: { list: [1, 2] }, messages: [user('a')] });
      });

      it('keeps sessions apart', async () => {
        const store = await setup();
        await store.apply('a', { expectedVersion: 0, state: 'A', append: [user('for a')] });
        await store.apply('b', { expectedVersion: 0, state: 'B', append: [user('for b'), user('b2')] });
        await store.apply('a', { expectedVersion: 1, state: 'A2', truncateTo: 0 });
        expect((await store.load('a'))?.messages).toEqual([]);
        expect((await store.load('b'))?.messages).toEqual([user('for b'), user('b2')]);
      });
    });

    describe('version check', () => {
      it('rejects a stale expectedVersion with SessionBusyError and changes nothing', async () => {
        const store = await setup();
        await store.apply('s', { expectedVersion: 0, state: 'v1', append: [user('a')] });
        await store.apply('s', { expectedVersion: 1, state: 'v2', append: [user('b')] });
        const before = await store.load('s');
        const error = await rejection(store.apply('s', { expectedVersion: 1, state: 'stale', truncateTo: 0, append: [user('x')] }));
        expect(error).toBeInstanceOf(SessionBusyError);
        expect(error).toMatchObject({ code: 'SessionBusy', sessionId: 's', expected: 1, actual: 2 });
        expect(await store.load('s')).toEqual(before);
        expect(await rejection(store.apply('s', { expectedVersion: 7, state: 'future' }))).toMatchObject({ expected: 7, actual: 2 });
        expect(await store.load('s')).toEqual(before);
      });

      it('creating an existing session is a conflict; updating a missing one is SessionNotFoundError', async () => {
        const store = await setup();
        await store.apply('s', { expectedVersion: 0, state: 1 });
        const exists = await rejection(store.apply('s', { expectedVersion: 0, state: 2, append: [user('x')] }));
        expect(exists).toBeInstanceOf(SessionBusyError);
        expect(exists).toMatchObject({ expected: 0, actual: 1 });
        expect(await store.load('s')).toEqual({ sessionId: 's', version: 1, state: 1, messages: [] });
        const missing = await rejection(store.apply('ghost', { expectedVersion: 3, state: 1 }));
        expect(missing).toBeInstanceOf(SessionNotFoundError);
        expect(missing).toMatchObject({ sessionId: 'ghost' });
        expect(await store.load('ghost')).toBeUndefined();
      });

      it('of concurrent writers with the same expectedVersion exactly one wins (one instance)', async () => {
        const store = await setup();
        await store.apply('s', { expectedVersion: 0, state: 'start', append: [user('q')] });
        const results = await Promise.allSettled(
          [0, 1, 2, 3, 4].map((i) => store.apply('s', { expectedVersion: 1, state: `w${i}`, append: [assistant(`w${i}`)] })),
        );
        await expectOneWinner(store, results);
      });

      it('of concurrent writers on two instances over the same storage exactly one wins', async () => {
        const store = await setup();
        const other = await sibling();
        await store.apply('s', { expectedVersion: 0, state: 'start', append: [user('q')] });
        const results = await Promise.allSettled(
          [store, other, store, other].map((s, i) => s.apply('s', { expectedVersion: 1, state: `w${i}`, append: [assistant(`w${i}`)] })),
        );
        await expectOneWinner(other, results);
      });

      it('of concurrent creators exactly one wins', async () => {
        const store = await setup();
        const other = await sibling();
        const results = await Promise.allSettled(
          [store, other, store, other].map((s, i) => s.apply('new', { expectedVersion: 0, state: `w${i}`, append: [assistant(`w${i}`)] })),
        );
        const winners = results.filter((r) => r.status === 'fulfilled');
        expect(winners).toHaveLength(1);
        for (const r of results) if (r.status === 'rejected') expect(r.reason).toMatchObject({ code: 'SessionBusy', expected: 0, actual: 1 });
        const loaded = await store.load('new');
        expect(loaded?.version).toBe(1);
        expect(loaded?.messages).toEqual([assistant(loaded?.state as string)]);
      });

      async function expectOneWinner(store: SessionStore, results: PromiseSettledResult<number>[]): Promise<void> {
        const winners = results.filter((r) => r.status === 'fulfilled');
        expect(winners).toHaveLength(1);
        expect(winners[0]).toMatchObject({ value: 2 });
        for (const r of results) {
          if (r.status === 'rejected') {
            expect(r.reason).toBeInstanceOf(SessionBusyError);
            expect(r.reason).toMatchObject({ expected: 1, actual: 2 });
          }
        }
        const loaded = await store.load('s');
        expect(loaded?.version).toBe(2);
        // The winner's step landed whole, and nothing of the losers.
        expect(loaded?.messages).toEqual([user('q'), assistant(loaded?.state as string)]);
      }
    });

    describe('invalid writes', () => {
      it('are rejected with InvalidWriteError before anything is written', async () => {
        const store = await setup();
        await store.apply('s', { expectedVersion: 0, state: 'ok', append: [user('a'), user('b')] });
        const before = await store.load('s');
        const bad: Array<[string, () => Promise<unknown>]> = [
          ['truncate past the end', () => store.apply('s', { expectedVersion: 1, state: 'x', truncateTo: 3 })],
          ['invalid message', () => store.apply('s', { expectedVersion: 1, state: 'x', append: [{ role: 'robot', content: 'hi' } as never] })],
          ['replaceLog with append', () => store.apply('s', { expectedVersion: 1, state: 'x', replaceLog: [], append: [user('c')] })],
          ['BigInt state', () => store.apply('s', { expectedVersion: 1, state: { n: 1n } })],
          ['undefined state', () => store.apply('s', { expectedVersion: 1, state: undefined })],
          ['negative version', () => store.apply('s', { expectedVersion: -1, state: 'x' })],
          ['truncate a new session', () => store.apply('t', { expectedVersion: 0, state: 'x', truncateTo: 1 })],
          ['bad journal entry', () => store.journalToolResult('s', 'k', { role: 'tool', toolCallId: '', toolName: 'x', content: '' })],
          ['empty turn key', () => store.journalToolResult('s', '', toolResult('c', 'x'))],
        ];
        for (const [what, attempt] of bad) {
          const error = await rejection(attempt());
          expect(error, what).toBeInstanceOf(InvalidWriteError);
        }
        expect(await store.load('s')).toEqual(before);
        expect(await store.load('t')).toBeUndefined();
        expect(await store.journaledToolResults('s', 'k')).toEqual([]);
      });
    });

    describe('session ids', () => {
      const BAD_IDS: Array<[string, string]> = [
        ['empty', ''],
        ['a lone high surrogate', 'a\uD800'],
        ['another lone high surrogate', 'a\uDBFF'],
        ['a lone low surrogate', '\uDC00b'],
        ['a NUL', 'a\u0000b'],
        ['a C0 control', 'bell\u0007'],
        ['DEL', 'x\u007F'],
        ['a C1 control', 'x\u009B[31m'],
        ['one code unit past the limit', 'x'.repeat(MAX_SESSION_ID_LENGTH + 1)],
        ['1 MB', 'y'.repeat(1 << 20)],
      ];

      it('one rule for every call: refused with InvalidSessionIdError before any query, nothing written', async () => {
        const store = await setup();
        await store.apply('keep', { expectedVersion: 0, state: 'k', append: [user('a')] });
        for (const [what, id] of BAD_IDS) {
          const calls: Array<[string, () => Promise<unknown>]> = [
            ['load', () => store.load(id)],
            ['apply', () => store.apply(id, { expectedVersion: 0, state: 'x', append: [user('x')] })],
            ['journalToolResult', () => store.journalToolResult(id, 'k', toolResult('c', 'x'))],
            ['journaledToolResults', () => store.journaledToolResults(id, 'k')],
          ];
          for (const [call, attempt] of calls) {
            const error = await rejection(attempt());
            expect(error, `${call} with ${what}`).toBeInstanceOf(InvalidSessionIdError);
            expect(error).toMatchObject({ code: 'InvalidSessionId', sessionId: id });
            // The message escapes the id and cuts it short: a 1 MB id is not echoed back.
            expect((error as Error).message.length).toBeLessThan(300);
            expect((error as Error).message).not.toMatch(/[\u0000-\u001f\u007f-\u009f]/);
          }
        }
        expect((await store.list()).map((s) => s.sessionId)).toEqual(['keep']);
      });

      it('ids at the edge of the rule work and stay apart: the limit, astral characters, SQL, prototype names', async () => {
        const store = await setup();
        const ids = ['x'.repeat(MAX_SESSION_ID_LENGTH), 'emoji 😀 𝄞', "'; DROP TABLE sessions; --", '__proto__', 'constructor', 'toString', 'a b/c\\d'];
        for (const [i, id] of ids.entries()) {
          await store.apply(id, { expectedVersion: 0, state: i, append: [user(`for ${i}`)] });
          await store.journalToolResult(id, 'k', toolResult('c', `r${i}`));
        }
        for (const [i, id] of ids.entries()) {
          expect(await store.load(id)).toEqual({ sessionId: id, version: 1, state: i, messages: [user(`for ${i}`)] });
          expect(await store.journaledToolResults(id, 'k')).toEqual([toolResult('c', `r${i}`)]);
        }
        expect((await store.list()).map((s) => s.sessionId).sort()).toEqual([...ids].sort());
      });
    });

    describe('corrupt rows', () => {
      async function twoSessions(store: SessionStore): Promise<void> {
        await store.apply('bad', { expectedVersion: 0, state: { ok: true }, append: [user('a'), assistant('b'), user('c')] });
        await store.apply('good', { expectedVersion: 0, state: { ok: true }, append: [user('fine')] });
      }
      async function expectCorrupt(store: SessionStore, part: object, problem: RegExp): Promise<void> {
        const error = await rejection(store.load('bad'));
        expect(error).toBeInstanceOf(CorruptSessionError);
        expect(error).toMatchObject({ code: 'CorruptSession', sessionId: 'bad', part });
        expect((error as Error).message).toContain('session bad');
        expect((error as CorruptSessionError).problem).toMatch(problem);
        // The damage stays in its session.
        expect(await store.load('good')).toEqual({ sessionId: 'good', version: 1, state: { ok: true }, messages: [user('fine')] });
        expect((await store.list()).map((s) => s.sessionId).sort()).toEqual(['bad', 'good']);
      }

      it('unparsable JSON in a message names the session and the position', async () => {
        const store = await setup();
        await twoSessions(store);
        await fixture.raw.setMessage('bad', 1, '{"role":"assistant","content":');
        await expectCorrupt(store, { kind: 'message', position: 1 }, /unparsable JSON/);
        expect(String(await rejection(store.load('bad')))).toContain('position 1');
      });

      it('a message that fails MessageSchema names the zod issue', async () => {
        const store = await setup();
        await twoSessions(store);
        await fixture.raw.setMessage('bad', 2, '{"role":"robot","content":"beep"}');
        await expectCorrupt(store, { kind: 'message', position: 2 }, /role/);
        await fixture.raw.setMessage('bad', 2, '{"role":"user","content":42}');
        await expectCorrupt(store, { kind: 'message', position: 2 }, /content/);
      });

      it('a missing row (gap in positions) is reported, not silently skipped', async () => {
        const store = await setup();
        await twoSessions(store);
        await fixture.raw.deleteMessage('bad', 1);
        await expectCorrupt(store, { kind: 'log' }, /position 1/);
      });

      it('a stray row past the end is reported by load, and an append onto it fails without writing', async () => {
        const store = await setup();
        await twoSessions(store);
        await fixture.raw.insertMessage('bad', 3, JSON.stringify(user('stray')));
        await expectCorrupt(store, { kind: 'log' }, /counts 3 messages but the log holds 4/);
        const error = await rejection(store.apply('bad', { expectedVersion: 1, state: 'next', append: [user('d')] }));
        expect(error).toBeInstanceOf(CorruptSessionError);
        expect(error).toMatchObject({ sessionId: 'bad', part: { kind: 'log' } });
        expect((await store.list()).find((s) => s.sessionId === 'bad')).toMatchObject({ version: 1, messageCount: 3 });
        // A rewind over the stray row repairs the log.
        await store.apply('bad', { expectedVersion: 1, state: 'repaired', truncateTo: 3, append: [user('d')] });
        expect((await store.load('bad'))?.messages.map((m) => m.content)).toEqual(['a', 'b', 'c', 'd']);
      });

      it('an unparsable state row is reported', async () => {
        const store = await setup();
        await twoSessions(store);
        await fixture.raw.setState('bad', 'not json');
        await expectCorrupt(store, { kind: 'state' }, /unparsable JSON/);
      });

      it('a corrupt journal entry names the turn and the call', async () => {
        const store = await setup();
        await twoSessions(store);
        await store.journalToolResult('bad', 't1', toolResult('c1', 'fine'));
        await fixture.raw.setJournal('bad', 't1', 'c1', '{"role":"tool"}');
        const error = await rejection(store.journaledToolResults('bad', 't1'));
        expect(error).toBeInstanceOf(CorruptSessionError);
        expect(error).toMatchObject({ sessionId: 'bad', part: { kind: 'journal', turnKey: 't1', toolCallId: 'c1' } });
      });
    });

    describe('tool journal', () => {
      it('returns results in recording order, per session and turn; the first result recorded wins', async () => {
        const store = await setup();
        await store.journalToolResult('s', 't1', toolResult('c2', 'second call, finished first'));
        await store.journalToolResult('s', 't1', toolResult('c1', 'first call'));
        await store.journalToolResult('s', 't2', toolResult('c1', 'other turn'));
        await store.journalToolResult('other', 't1', toolResult('c1', 'other session'));
        await store.journalToolResult('s', 't1', toolResult('c1', 'a re-run must not replace it'));
        expect(await store.journaledToolResults('s', 't1')).toEqual([toolResult('c2', 'second call, finished first'), toolResult('c1', 'first call')]);
        expect(await store.journaledToolResults('s', 't2')).toEqual([toolResult('c1', 'other turn')]);
        expect(await store.journaledToolResults('s', 'none')).toEqual([]);
        const viaSibling = await sibling();
        expect(await viaSibling.journaledToolResults('other', 't1')).toEqual([toolResult('c1', 'other session')]);
      });

      it('a step clears the turns it names (or all) in the same transaction; other sessions keep theirs', async () => {
        const store = await setup();
        await store.apply('s', { expectedVersion: 0, state: 0 });
        await store.journalToolResult('s', 't1', toolResult('c1', 'x'));
        await store.journalToolResult('s', 't2', toolResult('c2', 'y'));
        await store.journalToolResult('s', 't3', toolResult('c3', 'z'));
        await store.journalToolResult('other', 't1', toolResult('c1', 'kept'));
        await store.apply('s', { expectedVersion: 1, state: 1, append: [toolResult('c1', 'x')], clearJournal: ['t1', 't2'] });
        expect(await store.journaledToolResults('s', 't1')).toEqual([]);
        expect(await store.journaledToolResults('s', 't2')).toEqual([]);
        expect(await store.journaledToolResults('s', 't3')).toEqual([toolResult('c3', 'z')]);
        await store.apply('s', { expectedVersion: 2, state: 2, clearJournal: 'all' });
        expect(await store.journaledToolResults('s', 't3')).toEqual([]);
        expect(await store.journaledToolResults('other', 't1')).toEqual([toolResult('c1', 'kept')]);
      });

      it('a rejected step clears nothing', async () => {
        const store = await setup();
        await store.apply('s', { expectedVersion: 0, state: 0 });
        await store.journalToolResult('s', 't1', toolResult('c1', 'x'));
        await expect(store.apply('s', { expectedVersion: 5, state: 1, clearJournal: 'all' })).rejects.toBeInstanceOf(SessionBusyError);
        expect(await store.journaledToolResults('s', 't1')).toEqual([toolResult('c1', 'x')]);
      });
    });

    describe('list', () => {
      it('summarizes every session from its state row, most recently updated first', async () => {
        const store = await setup();
        expect(await store.list()).toEqual([]);
        await store.apply('a', { expectedVersion: 0, state: 0, append: [user('1')] });
        await store.apply('b', { expectedVersion: 0, state: 0, append: [user('1'), user('2')] });
        await new Promise((r) => setTimeout(r, 5));
        await store.apply('a', { expectedVersion: 1, state: 1, append: [user('2'), user('3')] });
        const list = await store.list();
        expect(list.map(({ sessionId, version, messageCount }) => ({ sessionId, version, messageCount }))).toEqual([
          { sessionId: 'a', version: 2, messageCount: 3 },
          { sessionId: 'b', version: 1, messageCount: 2 },
        ]);
        for (const entry of list) {
          expect(entry.updatedAt).toBeInstanceOf(Date);
          expect(entry.createdAt.getTime()).toBeLessThanOrEqual(entry.updatedAt.getTime());
        }
        expect(list[0]!.updatedAt.getTime()).toBeGreaterThan(list[0]!.createdAt.getTime());
      });
    });

    describe('trace', () => {
      it('appends entries in order, reads them after a cursor, keeps sessions apart and checks what it is given', async () => {
        const store = await setup();
        await store.appendTrace!('a', [{ type: 'x', n: 1 }, { type: 'x', n: 2 }]);
        await store.appendTrace!('b', [{ type: 'y' }]);
        await store.appendTrace!('a', [{ type: 'x', n: 3, text: '<script>' }]);
        const all = await store.readTrace!('a');
        expect(all.map((r) => r.entry)).toEqual([{ type: 'x', n: 1 }, { type: 'x', n: 2 }, { type: 'x', n: 3, text: '<script>' }]);
        expect(all.map((r) => r.seq)).toEqual([...all.map((r) => r.seq)].sort((x, y) => x - y));
        expect((await store.readTrace!('a', all[1]!.seq)).map((r) => r.entry)).toEqual([{ type: 'x', n: 3, text: '<script>' }]);
        // A limit reads the first entries only, after the cursor too; one that is no whole number >= 1 is refused.
        expect((await store.readTrace!('a', 0, 2)).map((r) => r.entry)).toEqual([{ type: 'x', n: 1 }, { type: 'x', n: 2 }]);
        expect((await store.readTrace!('a', all[0]!.seq, 1)).map((r) => r.entry)).toEqual([{ type: 'x', n: 2 }]);
        expect(await store.readTrace!('a', 0, 10)).toHaveLength(3);
        for (const bad of [0, 1.5, Number.NaN, -1]) expect(await rejection(store.readTrace!('a', 0, bad))).toBeInstanceOf(StoreError);
        expect((await store.readTrace!('b')).map((r) => r.entry)).toEqual([{ type: 'y' }]);
        expect(await store.readTrace!('none')).toEqual([]);
        // Another connection sees what this one wrote.
        const other = await sibling();
        expect(await other.readTrace!('a')).toHaveLength(3);
        expect(await rejection(store.appendTrace!('a', [42]))).toBeInstanceOf(InvalidWriteError);
        expect(await rejection(store.appendTrace!('a\u0000', [{}]))).toBeInstanceOf(InvalidSessionIdError);
        expect(await store.readTrace!('a')).toHaveLength(3);
      });

      it("a step's trace entries land with the step, after what was there, in order; a step that fails writes none", async () => {
        const store = await setup();
        const entries = async (id: string) => (await store.readTrace!(id)).map((r) => r.entry);
        await store.apply('a', { expectedVersion: 0, state: 1, append: [user('1')], trace: [{ type: 'run', n: 1 }, { type: 'step', v: 1 }] });
        await store.appendTrace!('a', [{ type: 'tool', n: 2 }]);
        await store.apply('a', { expectedVersion: 1, state: 2, append: [user('2')], trace: [{ type: 'step', v: 2 }] });
        // A rewind (a truncating step: PostgreSQL's other statement path) carries its entries too.
        await store.apply('a', { expectedVersion: 2, state: 3, truncateTo: 1, trace: [{ type: 'step', v: 3 }] });
        const expected = [{ type: 'run', n: 1 }, { type: 'step', v: 1 }, { type: 'tool', n: 2 }, { type: 'step', v: 2 }, { type: 'step', v: 3 }];
        expect(await entries('a')).toEqual(expected);
        const seqs = (await store.readTrace!('a')).map((r) => r.seq);
        expect(seqs).toEqual([...seqs].sort((x, y) => x - y));
        expect(await (await sibling()).readTrace!('a')).toHaveLength(5);

        // A lost version check, a create of a session that exists, a truncating step past the end: no entry.
        expect(await rejection(store.apply('a', { expectedVersion: 1, state: 'stale', trace: [{ type: 'lost' }] }))).toBeInstanceOf(SessionBusyError);
        expect(await rejection(store.apply('a', { expectedVersion: 0, state: 'again', trace: [{ type: 'lost' }] }))).toBeInstanceOf(SessionBusyError);
        expect(
          await rejection(store.apply('a', { expectedVersion: 3, state: 'far', truncateTo: 9, trace: [{ type: 'lost' }] })),
        ).toBeInstanceOf(InvalidWriteError);
        // A bad entry fails the whole step: neither the row nor the log nor the other entries are written.
        expect(await rejection(store.apply('a', { expectedVersion: 3, state: 4, append: [user('x')], trace: [{ type: 'ok' }, 42] }))).toBeInstanceOf(
          InvalidWriteError,
        );
        expect(await rejection(store.apply('b', { expectedVersion: 0, state: 1, trace: [[1]] }))).toBeInstanceOf(InvalidWriteError);
        expect(await entries('a')).toEqual(expected);
        expect(await store.load('b')).toBeUndefined();
        expect(await store.load('a')).toMatchObject({ version: 3, state: 3, messages: [user('1')] });
      });
    });

    describe('store schema version', () => {
      it('an unknown schema version is a typed error, not a guess', async (ctx) => {
        await setup();
        if (!fixture.setSchemaVersion) return ctx.skip();
        await fixture.setSchemaVersion('99');
        const error = await rejection(
          (async () => {
            const store = await fixture.sibling();
            opened.push(store);
            await store.list();
          })(),
        );
        expect(error).toBeInstanceOf(StoreSchemaVersionError);
        expect(error).toMatchObject({ code: 'StoreSchemaVersion', found: '99' });
      });
    });

    describe('separate processes', () => {
      // Built by the first test that starts children (a store without child processes builds none).
      let command: NodeCommand | undefined;
      const child = async () => (command ??= await bundledCommand(CHILD));
      afterAll(() => command?.dispose());

      it('of four processes writing with the same expectedVersion exactly one wins', async (ctx) => {
        const store = await setup();
        if (!fixture.child) return ctx.skip();
        await store.apply('race', { expectedVersion: 0, state: 'start', append: [user('q')] });
        const results = await runChildren(
          await child(),
          [0, 1, 2, 3].map((i) => ({ store: fixture.child!, sessionId: 'race', kind: 'once' as const, expectedVersion: 1, tag: `p${i}` })),
        );
        expect(results.filter((r) => r.ok)).toHaveLength(1);
        for (const r of results) if (!r.ok) expect(r).toMatchObject({ code: 'SessionBusy', expected: 1, actual: 2 });
        const loaded = await store.load('race');
        expect(loaded?.version).toBe(2);
        expect(loaded?.messages).toEqual([user('q'), assistant(loaded?.state as string)]);
      });

      it('three processes doing read-modify-write steps lose no update and duplicate no message', async (ctx) => {
        const store = await setup();
        if (!fixture.child) return ctx.skip();
        await store.apply('counter', { expectedVersion: 0, state: { count: 0 } });
        const steps = 15;
        const results = await runChildren(
          await child(),
          [0, 1, 2].map((i) => ({ store: fixture.child!, sessionId: 'counter', kind: 'increments' as const, steps, tag: `p${i}` })),
        );
        for (const r of results) expect(r.ok).toBe(true);
        const loaded = await store.load('counter');
        expect(loaded?.state).toEqual({ count: 3 * steps });
        expect(loaded?.version).toBe(1 + 3 * steps);
        expect(loaded?.messages).toHaveLength(3 * steps);
        for (const tag of ['p0', 'p1', 'p2']) {
          const mine = loaded!.messages.map((m) => m.content).filter((c) => c.startsWith(`${tag}:`));
          expect(mine).toEqual(Array.from({ length: steps }, (_, k) => `${tag}:${k}`));
        }
      });
    });
  });
}
