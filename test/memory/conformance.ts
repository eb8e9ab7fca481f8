import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { agentMemory, deleteScope, exportScope } from '../../src/memory.js';
import type { Model, ModelRequest } from '../../src/model.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { forkSession } from '../../src/sessions/fork.js';
import { MemoryHitSchema, type MemoryBackend, type MemoryEntry, type MemoryHit } from '../../src/memory/memory-backend.js';
import { memoryBackend } from '../../src/memory/memory-store.js';
import { searchTerms } from '../../src/memory/search-terms.js';
import type { SessionStore } from '../../src/stores/session-store.js';

/**
 * One suite every memory backend must pass (memory, SQLite, PostgreSQL), reached as the operation
 * reaches it: `memoryBackend(store)`. A backend supplies a harness: a fresh store whose memory is
 * empty, and another store over the same storage (a second connection, as another process has).
 */
export interface MemoryFixture {
  store: SessionStore;
  sibling(): Promise<SessionStore>;
}

export interface MemoryHarness {
  /** A fresh store with no memory; called once per test. */
  create(): Promise<MemoryFixture>;
  /** After the whole suite (drop schemas, remove files). */
  cleanup?(): Promise<void>;
}

const entry = (sessionId: string, position: number, text: string, extra: Partial<MemoryEntry> = {}): MemoryEntry => ({
  sessionId,
  position,
  role: position % 2 === 0 ? 'user' : 'assistant',
  text,
  at: 1_700_000_000_000 + position,
  ...extra,
});

/**
 * One run of a session: `memory` says whether the agent has memory. Returns the system text of
 * its first request (where recall shows).
 */
async function talk(store: SessionStore, sessionId: string, scope: string | undefined, message: string, memory: boolean): Promise<string> {
  const sent: ModelRequest[] = [];
  const operation = agentMemory({ store });
  const model: Model = {
    name: 'notes',
    generate: async (request) => (sent.push(request), { message: { role: 'assistant', content: `Noted: ${message.length} characters.` }, finishReason: 'stop' }),
  };
  const machine = createAgentMachine({ model, operations: memory ? [operation] : [] });
  const session = await DurableSession.open({ machine, store, sessionId, ...(scope !== undefined && { scope }) });
  try {
    session.send({ type: 'input', message });
    expect((await session.whenIdle())?.outcome.type).toBe('Completed');
  } finally {
    await session.close();
    await operation.close();
  }
  return sent[0]!.messages.filter((m) => m.role === 'system').map((m) => m.content).join('\n');
}

const keys = (hits: readonly MemoryHit[]): string[] => hits.map((hit) => `${hit.sessionId}:${hit.position}`);
const search = (backend: MemoryBackend, scope: string, query: string, limit = 10, excludeSession?: string) =>
  backend.search(scope, searchTerms(query), { limit, excludeSession });

export function describeMemoryConformance(name: string, harness: MemoryHarness): void {
  describe(`memory backend conformance: ${name}`, () => {
    const open: { close(): Promise<void> }[] = [];

    async function fresh(): Promise<{ store: SessionStore; backend: MemoryBackend; again: () => Promise<MemoryBackend> }> {
      const fixture = await harness.create();
      open.push(fixture.store);
      const backend = memoryBackend(fixture.store);
      open.push(backend);
      return {
        store: fixture.store,
        backend,
        async again() {
          const store = await fixture.sibling();
          open.push(store);
          const other = memoryBackend(store);
          open.push(other);
          return other;
        },
      };
    }

    afterEach(async () => {
      // Backends before their stores: a backend may use its store's connection.
      for (const thing of open.splice(0).reverse()) await thing.close();
    });
    afterAll(async () => {
      await harness.cleanup?.();
    });

    it('reads and writes a working document per scope, counting its versions', async () => {
      const { backend, again } = await fresh();
      expect(await backend.readWorking('user:ada')).toBeNull();
      expect(await backend.writeWorking('user:ada', 'Name: Ada.', 1_000)).toEqual({ content: 'Name: Ada.', version: 1, updatedAt: 1_000 });
      expect(await backend.writeWorking('user:ada', 'Name: Ada. Likes tea.', 2_000)).toEqual({ content: 'Name: Ada. Likes tea.', version: 2, updatedAt: 2_000 });
      expect(await backend.readWorking('user:ada')).toEqual({ content: 'Name: Ada. Likes tea.', version: 2, updatedAt: 2_000 });
      expect(await backend.readWorking('user:bob')).toBeNull();
      // Another connection to the same storage reads it: memory outlives the backend that wrote it.
      const other = await again();
      expect(await other.readWorking('user:ada')).toEqual({ content: 'Name: Ada. Likes tea.', version: 2, updatedAt: 2_000 });
      expect(await other.writeWorking('user:ada', '', 3_000)).toEqual({ content: '', version: 3, updatedAt: 3_000 });
      expect(await backend.readWorking('user:ada')).toEqual({ content: '', version: 3, updatedAt: 3_000 });
    });

    it('indexes an entry once per session and position: a second index keeps the first', async () => {
      const { backend, again } = await fresh();
      await backend.index('s', [entry('a', 0, 'the first text'), entry('a', 1, 'a reply')]);
      await backend.index('s', [entry('a', 0, 'another text for the same place', { at: 9 }), entry('a', 2, 'new'), entry('a', 2, 'new again in one batch')]);
      await backend.index('s', []);
      const exported = await backend.exportScope('s');
      expect(exported.entries.map((e) => [e.position, e.text])).toEqual([
        [0, 'the first text'],
        [1, 'a reply'],
        [2, 'new'],
      ]);
      expect(keys(await search(backend, 's', 'another'))).toEqual([]);
      expect((await (await again()).exportScope('s')).entries).toEqual(exported.entries);
    });

    it('ranks entries that hold rarer terms first, finds by any term, honours limit and excludeSession', async () => {
      const { backend } = await fresh();
      await backend.index('s', [
        ...[0, 1, 2, 3, 4].map((i) => entry(`tea-${i}`, 0, `We drank tea on day ${i}.`)),
        entry('keeper', 0, 'The lighthouse keeper waved.'),
        entry('other', 0, 'Nothing to do with it.'),
      ]);
      const hits = await search(backend, 's', 'tea lighthouse');
      for (const hit of hits) MemoryHitSchema.parse(hit);
      expect(hits[0]).toMatchObject({ sessionId: 'keeper', position: 0, role: 'user', text: 'The lighthouse keeper waved.', at: 1_700_000_000_000 });
      expect(keys(hits).sort()).toEqual(['keeper:0', 'tea-0:0', 'tea-1:0', 'tea-2:0', 'tea-3:0', 'tea-4:0']);
      // Best first: scores never rise down the list.
      for (let i = 1; i < hits.length; i++) expect(hits[i]!.score).toBeLessThanOrEqual(hits[i - 1]!.score);
      expect(keys(await search(backend, 's', 'lighthouse unheard'))).toEqual(['keeper:0']);
      expect(await search(backend, 's', 'unheard')).toEqual([]);
      expect(await backend.search('s', [], { limit: 10 })).toEqual([]);
      expect(await search(backend, 's', 'tea lighthouse', 2)).toHaveLength(2);
      expect(keys(await search(backend, 's', 'tea lighthouse', 10, 'keeper')).sort()).toEqual(['tea-0:0', 'tea-1:0', 'tea-2:0', 'tea-3:0', 'tea-4:0']);
      expect(await search(backend, 'nobody', 'tea')).toEqual([]);
    });

    it('finds entries by cosine similarity, skipping vectors of another length and entries without one', async () => {
      const { backend } = await fresh();
      const exact = [0.30000000000000004, 1e-300, 123456.789];
      await backend.index('s', [
        entry('a', 0, 'east', { vector: [1, 0, 0] }),
        entry('a', 1, 'north', { vector: [0, 1, 0] }),
        entry('b', 0, 'mostly east', { vector: [0.9, 0.1, 0] }),
        entry('b', 1, 'other model', { vector: [1, 0] }),
        entry('c', 0, 'no vector'),
        entry('c', 1, 'exact', { vector: exact }),
      ]);
      const hits = await backend.similar('s', [2, 0, 0], { limit: 10 });
      expect(keys(hits)).toEqual(['a:0', 'b:0', 'c:1', 'a:1']);
      expect(hits[0]!.score).toBeCloseTo(1, 12);
      expect(hits[1]!.score).toBeCloseTo(0.9 / Math.hypot(0.9, 0.1), 12);
      expect(hits.at(-1)!.score).toBeCloseTo(0, 12);
      expect(hits[0]).toMatchObject({ sessionId: 'a', position: 0, role: 'user', text: 'east' });
      expect(keys(await backend.similar('s', [2, 0, 0], { limit: 2 }))).toEqual(['a:0', 'b:0']);
      expect(keys(await backend.similar('s', [2, 0, 0], { limit: 10, excludeSession: 'a' }))).toEqual(['b:0', 'c:1']);
      expect(keys(await backend.similar('s', [0, 3], { limit: 10 }))).toEqual(['b:1']);
      expect(await backend.similar('s', [1, 2, 3, 4], { limit: 10 })).toEqual([]);
      expect(await backend.similar('nobody', [1, 0, 0], { limit: 10 })).toEqual([]);
      // Vectors come back as they were given, bit for bit; an entry without one has none.
      const exported = await backend.exportScope('s');
      expect(exported.entries.find((e) => e.text === 'exact')!.vector).toEqual(exact);
      expect('vector' in exported.entries.find((e) => e.text === 'no vector')!).toBe(false);
    });

    it('lists the scopes with their counts and latest time', async () => {
      const { backend } = await fresh();
      expect(await backend.listScopes()).toEqual([]);
      await backend.index('both', [entry('s1', 0, 'x', { at: 100 }), entry('s1', 1, 'y', { at: 200 }), entry('s2', 0, 'z', { at: 150 })]);
      await backend.writeWorking('both', 'héllo 😀', 300);
      await backend.index('entries-only', [entry('s1', 0, 'x', { at: 50 })]);
      await backend.writeWorking('working-only', 'abc', 70);
      // The latest time is read from what is stored: here the document's last write.
      await backend.writeWorking('working-only', 'abcd', 60);
      const scopes = (await backend.listScopes()).sort((a, b) => a.scope.localeCompare(b.scope));
      expect(scopes).toEqual([
        { scope: 'both', workingChars: 'héllo 😀'.length, entries: 3, sessions: 2, updatedAt: new Date(300) },
        { scope: 'entries-only', workingChars: 0, entries: 1, sessions: 1, updatedAt: new Date(50) },
        { scope: 'working-only', workingChars: 4, entries: 0, sessions: 0, updatedAt: new Date(60) },
      ]);
    });

    it("exports everything of one scope, in the order indexed, and nothing of another's", async () => {
      const { backend } = await fresh();
      await backend.writeWorking('a', 'doc of a', 10);
      await backend.index('a', [entry('z', 0, 'first'), entry('b', 0, 'second', { vector: [1, 2] }), entry('z', 1, 'third')]);
      await backend.writeWorking('b', 'doc of b', 20);
      await backend.index('b', [entry('z', 0, 'of b')]);
      expect(await backend.exportScope('a')).toEqual({
        scope: 'a',
        working: { content: 'doc of a', version: 1, updatedAt: 10 },
        entries: [entry('z', 0, 'first'), entry('b', 0, 'second', { vector: [1, 2] }), entry('z', 1, 'third')],
      });
      expect(await backend.exportScope('nobody')).toEqual({ scope: 'nobody', working: null, entries: [] });
    });

    it('deletes a scope: its document and entries, and search and similarity find nothing of it after', async () => {
      const { backend, again } = await fresh();
      await backend.writeWorking('a', 'doc of a', 10);
      await backend.index('a', [entry('s', 0, 'the lighthouse keeper', { vector: [1, 0] }), entry('s', 1, 'a lighthouse reply', { vector: [0, 1] })]);
      await backend.writeWorking('b', 'doc of b', 20);
      await backend.index('b', [entry('s', 0, 'another lighthouse', { vector: [1, 0] })]);
      expect(await backend.deleteScope('a')).toBe(2);
      expect(await backend.exportScope('a')).toEqual({ scope: 'a', working: null, entries: [] });
      expect(await backend.readWorking('a')).toBeNull();
      expect(await search(backend, 'a', 'lighthouse keeper')).toEqual([]);
      expect(await backend.similar('a', [1, 0], { limit: 10 })).toEqual([]);
      expect((await backend.listScopes()).map((s) => s.scope)).toEqual(['b']);
      // Another connection sees it gone too; the other scope is whole.
      const other = await again();
      expect(await search(other, 'a', 'lighthouse')).toEqual([]);
      expect(keys(await search(other, 'b', 'lighthouse'))).toEqual(['s:0']);
      expect((await other.readWorking('b'))?.content).toBe('doc of b');
      expect(await backend.deleteScope('a')).toBe(0);
      // A forgotten scope starts again empty: the same session and position index anew.
      await backend.index('a', [entry('s', 0, 'a new start')]);
      expect((await backend.exportScope('a')).entries.map((e) => e.text)).toEqual(['a new start']);
      expect(keys(await search(backend, 'a', 'new start'))).toEqual(['s:0']);
      expect((await backend.exportScope('a')).working).toBeNull();
    });

    it('never crosses scopes, even for the same session and position', async () => {
      const { backend } = await fresh();
      await backend.index('a', [entry('shared', 0, 'alpha secret of a', { vector: [1, 0] })]);
      await backend.index('b', [entry('shared', 0, 'bravo secret of b', { vector: [1, 0] })]);
      await backend.writeWorking('a', 'doc of a', 1);
      expect((await backend.exportScope('a')).entries.map((e) => e.text)).toEqual(['alpha secret of a']);
      expect((await backend.exportScope('b')).entries.map((e) => e.text)).toEqual(['bravo secret of b']);
      expect(await search(backend, 'a', 'bravo')).toEqual([]);
      expect((await search(backend, 'a', 'secret alpha bravo')).map((hit) => hit.text)).toEqual(['alpha secret of a']);
      expect((await backend.similar('a', [1, 0], { limit: 10 })).map((hit) => hit.text)).toEqual(['alpha secret of a']);
      expect((await backend.similar('b', [1, 0], { limit: 10 })).map((hit) => hit.text)).toEqual(['bravo secret of b']);
      expect(await backend.readWorking('b')).toBeNull();
      // Scopes are compared whole: a prefix, another case or a wildcard is another scope.
      for (const scope of ['', 'A', 'a ', '%', '*', 'a%', "a' OR '1'='1"]) {
        expect(await search(backend, scope, 'secret alpha bravo')).toEqual([]);
        expect(await backend.readWorking(scope)).toBeNull();
      }
    });

    it('searches operator words (OR, NEAR, AND, NOT) and unicode words as plain words', async () => {
      const { backend } = await fresh();
      await backend.index('s', [
        entry('ops', 0, 'cats AND dogs OR birds NOT fish NEAR water'),
        entry('uni', 0, 'Привет мир, Ünïcödé 東京 and the ﬁle'),
        entry('plain', 0, 'nothing special here'),
      ]);
      for (const word of ['OR', 'NEAR', 'AND', 'NOT', 'near', '"NEAR"', 'NEAR(']) {
        expect(keys(await search(backend, 's', word)), word).toContain('ops:0');
      }
      expect(keys(await search(backend, 's', 'NEAR'))).toEqual(['ops:0']);
      expect(keys(await search(backend, 's', 'ПРИВЕТ'))).toEqual(['uni:0']);
      expect(keys(await search(backend, 's', 'ünïcödé'))).toEqual(['uni:0']);
      expect(keys(await search(backend, 's', '東京'))).toEqual(['uni:0']);
      // NFKC on both sides: the ligature's text is found by the plain word.
      expect(keys(await search(backend, 's', 'file'))).toEqual(['uni:0']);
      expect(keys(await search(backend, 's', 'fish") OR ("water* AND -birds: ^NEAR/2'))).toEqual(['ops:0']);
      // Terms that are not plain words (which searchTerms never gives) are looked for as nothing, never parsed.
      for (const term of ['"', 'a" OR "b', 'fish*', 'NEAR(a b)', 'x:y', '!fish', 'fish | water', "'", '\\']) {
        expect(await backend.search('s', [term], { limit: 10 }), term).toEqual([]);
        expect(keys(await backend.search('s', [term, 'water'], { limit: 10 })), term).toEqual(['ops:0']);
      }
    });

    it('stores text with quotes, backslashes, NULs and control characters byte for byte', async () => {
      const { backend, again } = await fresh();
      const text = `He said "hi" and 'bye' \\ back\u0000slash\u0001 😀 é\r\n\ttab ${'%_'} $1 ?`;
      await backend.writeWorking('s', text, 1);
      await backend.index('s', [entry('q"uote\'s', 0, text, { vector: [1] })]);
      expect((await backend.readWorking('s'))?.content).toBe(text);
      const [hit] = await search(backend, 's', 'said');
      expect(hit?.text).toBe(text);
      expect(hit?.sessionId).toBe('q"uote\'s');
      expect((await backend.similar('s', [1], { limit: 1 }))[0]?.text).toBe(text);
      const other = await again();
      expect((await other.exportScope('s')).entries[0]!.text).toBe(text);
      expect((await other.readWorking('s'))?.content).toBe(text);
      expect((await other.listScopes())[0]!.workingChars).toBe(text.length);
    });

    it("a deleted scope's memory never comes back: a fork, or an old session given memory, indexes only what is said from then on; another scope keeps its own", async () => {
      const { store } = await fresh();
      await talk(store, 'ada-1', 'user:ada', 'My door code is zebra7.', true);
      // A session of Ada's the agent had no memory in yet: never indexed.
      await talk(store, 'ada-old', 'user:ada', 'My bank pin is walrus42.', false);
      await talk(store, 'bob-1', 'user:bob', 'My bike is a zanzibar cruiser.', true);
      expect(await deleteScope(store, 'user:ada')).toBe(2);

      // Ada's sessions still hold what she said; what they say from now on is hers to keep.
      const fork = await forkSession(store, 'ada-1', { at: 2, as: 'ada-1-fork' });
      expect(fork.messages).toBe(2);
      await talk(store, fork.sessionId, undefined, 'Hello again.', true);
      await talk(store, 'ada-old', undefined, 'Anything new today?', true);
      const asked = await talk(store, 'ada-new', 'user:ada', 'What are my door code and bank pin, zebra7 walrus42?', true);
      expect(asked).not.toContain('door code is');
      expect(asked).not.toContain('pin is walrus42');
      const kept = (await exportScope(store, 'user:ada')).entries;
      expect(kept.map((e) => `${e.sessionId}: ${e.text}`)).toEqual([
        'ada-1-fork: Hello again.',
        'ada-1-fork: Noted: 12 characters.',
        'ada-old: Anything new today?',
        'ada-old: Noted: 19 characters.',
        'ada-new: What are my door code and bank pin, zebra7 walrus42?',
        'ada-new: Noted: 52 characters.',
      ]);

      // Bob's memory is whole, and a fork of his session goes on indexing what is said in it.
      const bobFork = await forkSession(store, 'bob-1', { at: 2, as: 'bob-1-fork' });
      await talk(store, bobFork.sessionId, undefined, 'Is it blue?', true);
      expect(await talk(store, 'bob-2', 'user:bob', 'Which zanzibar bike do I ride?', true)).toContain('My bike is a zanzibar cruiser.');
      expect((await exportScope(store, 'user:bob')).entries.map((e) => `${e.sessionId}: ${e.text}`)).toEqual([
        'bob-1: My bike is a zanzibar cruiser.',
        'bob-1: Noted: 30 characters.',
        'bob-1-fork: Is it blue?',
        'bob-1-fork: Noted: 11 characters.',
        'bob-2: Which zanzibar bike do I ride?',
        'bob-2: Noted: 30 characters.',
      ]);
    });
  });
}
