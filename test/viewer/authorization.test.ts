/**
 * The viewer's and the inspector's `authorize` hook, over real HTTP on a real SQLite file: asked
 * before any store read for a page, an event stream, a comparison or a list; a list shows only the
 * sessions (and their subagents, and the schedules of sessions) the caller may read; a 404 refusal
 * reads exactly as a session that does not exist; a hook that throws, hangs or answers nonsense
 * refuses; the Host the client sent never reaches the hook.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActor, createMachine } from 'xstate';
import { createAgentMachine } from '../../src/index.js';
import { schedule } from '../../src/schedules.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../src/sqlite.js';
import type { SessionStore } from '../../src/stores/session-store.js';
import { scriptedModel } from '../../src/testing.js';
import { get as getWith } from './support.js';
import { startViewer, viewerInspector, ViewerOptionsError, type RunningViewer, type ViewerAccessRequest, type ViewerAuthorizer } from '../../src/viewer.js';

/** One GET as `user` (the `x-user` header); the status and the body. */
const get = (port: number, path: string, user?: string) => getWith(port, path, { host: `127.0.0.1:${port}`, ...(user && { 'x-user': user }) });

const dir = mkdtempSync(join(tmpdir(), 'loopchart-viewer-authorize-'));
let store: SqliteSessionStore;

/** A store that counts reads: a refused request must not cause one. */
function counting(inner: SessionStore): SessionStore & { reads: number } {
  const counted = Object.create(inner) as SessionStore & { reads: number };
  counted.reads = 0;
  for (const name of ['load', 'list', 'readTrace'] as const) {
    const read = (inner[name] as (...args: unknown[]) => unknown).bind(inner);
    (counted as unknown as Record<string, unknown>)[name] = (...args: unknown[]) => (counted.reads++, read(...args));
  }
  return counted;
}

/** Sessions are `<user>:<name>`; a user reads only their own, and the lists only with a user. */
const ownOnly: ViewerAuthorizer = ({ request, sessionId }) => {
  const user = request.headers.get('x-user');
  if (!user) return { allow: false, status: 401, reason: 'who are you?' };
  return sessionId === null || sessionId.startsWith(`${user}:`) || { allow: false, status: 404 };
};

async function completedSession(id: string, text: string) {
  const session = await DurableSession.open({ machine: createAgentMachine({ model: scriptedModel([{ text }]) }), store, sessionId: id });
  session.send({ type: 'input', message: `Hello from ${id}` });
  await session.whenIdle();
  await session.close();
}

beforeAll(async () => {
  store = new SqliteSessionStore({ path: join(dir, 'store.db') });
  await completedSession('ann:notes', 'Ann secret answer');
  await completedSession('bob:notes', 'Bob secret answer');
  await schedule(store, { id: 'ann-nightly', session: 'ann:notes', agent: 'a', input: 'Ann nightly input', every: 60_000 });
  await schedule(store, { id: 'bob-nightly', session: 'bob:notes', agent: 'a', input: 'Bob nightly input', every: 60_000 });
});
afterAll(async () => {
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('the viewer asks authorize', () => {
  let viewer: RunningViewer;
  let asked: ViewerAccessRequest[];
  let reads: SessionStore & { reads: number };
  beforeAll(async () => {
    asked = [];
    reads = counting(store);
    viewer = await startViewer({ store: reads, port: 0, authorize: (access) => (asked.push(access), ownOnly(access)) });
  });
  afterAll(() => viewer?.close());

  it('each user sees only their own sessions and schedules in the lists', async () => {
    const home = await get(viewer.port, '/', 'ann');
    expect(home.status).toBe(200);
    expect(home.body).toContain('ann:notes');
    expect(home.body).not.toContain('bob:notes');
    const schedules = await get(viewer.port, '/schedules', 'ann');
    expect(schedules.status).toBe(200);
    expect(schedules.body).toContain('ann-nightly');
    expect(schedules.body).not.toContain('bob-nightly');
    expect(schedules.body).not.toContain('Bob nightly input');
  });

  it("another user's session page, event stream and comparison are refused before the store is read, as if they did not exist", async () => {
    const own = await get(viewer.port, `/s/${encodeURIComponent('ann:notes')}`, 'ann');
    expect(own.status).toBe(200);
    expect(own.body).toContain('Ann secret answer');
    // Her own live stream opens (cut at its first bytes by the helper).
    expect((await get(viewer.port, `/s/${encodeURIComponent('ann:notes')}/events`, 'ann')).status).toBe(200);
    const before = reads.reads;
    const other = await get(viewer.port, `/s/${encodeURIComponent('bob:notes')}`, 'ann');
    expect(reads.reads).toBe(before);
    const missing = await get(viewer.port, `/s/${encodeURIComponent('ann:nothing')}`, 'ann');
    expect(other.status).toBe(404);
    expect(other.body).not.toContain('Bob secret answer');
    // The refusal and a session that does not exist read the same, but for the id.
    expect(other.body.replaceAll('bob:notes', 'X')).toBe(missing.body.replaceAll('ann:nothing', 'X'));
    const afterPage = reads.reads;
    expect((await get(viewer.port, `/s/${encodeURIComponent('bob:notes')}/events`, 'ann')).status).toBe(404);
    expect((await get(viewer.port, `/compare/${encodeURIComponent('ann:notes')}/${encodeURIComponent('bob:notes')}`, 'ann')).status).toBe(404);
    expect(reads.reads).toBe(afterPage);
  });

  it('no user: 401 with the reason on every page; the hook gets the request with the path asked, on 127.0.0.1', async () => {
    asked.length = 0;
    for (const path of ['/', '/schedules', `/s/${encodeURIComponent('ann:notes')}`, `/s/${encodeURIComponent('ann:notes')}/events`]) {
      const page = await get(viewer.port, path);
      expect(page.status, path).toBe(401);
      expect(page.body).toContain('who are you?');
    }
    expect(asked.map((a) => [new URL(a.request.url).pathname, a.sessionId])).toEqual([
      ['/', null],
      ['/schedules', null],
      [`/s/${encodeURIComponent('ann:notes')}`, 'ann:notes'],
      [`/s/${encodeURIComponent('ann:notes')}/events`, 'ann:notes'],
    ]);
    expect(new URL(asked[0]!.request.url).origin).toBe(`http://127.0.0.1:${viewer.port}`);
  });
});

describe('a hook that fails refuses', () => {
  const cases: [string, ViewerAuthorizer][] = [
    ['throws', () => {
      throw new Error('database down: password=hunter2');
    }],
    ['rejects', () => Promise.reject(new Error('nope'))],
    ['answers nonsense', () => 'yes' as never],
    ['answers an object whose getter throws', () => ({ get allow(): boolean { throw new Error('boom'); } }) as never],
    ['never answers', () => new Promise<boolean>(() => {})],
  ];
  for (const [name, authorize] of cases) {
    it(`${name}: 403, the error's text never shown, the viewer still serving`, async () => {
      const viewer = await startViewer({ store, port: 0, authorize, authorizeTimeoutMs: 200 });
      try {
        for (const path of ['/', `/s/${encodeURIComponent('ann:notes')}`]) {
          const page = await get(viewer.port, path, 'ann');
          expect(page.status).toBe(403);
          expect(page.body).not.toContain('Ann secret answer');
          expect(page.body).not.toContain('hunter2');
        }
      } finally {
        await viewer.close();
      }
    });
  }

  it("a list leaves out the sessions the hook fails on, a session page the subagents' sessions it refuses", async () => {
    const child = 'ann:notes/run-1:turn-1:call-1';
    await completedSession(child, 'Child answer');
    const viewer = await startViewer({
      store,
      port: 0,
      authorize: ({ sessionId }) => {
        if (sessionId === 'bob:notes') throw new Error('no');
        return sessionId !== child;
      },
    });
    try {
      const home = await get(viewer.port, '/');
      expect(home.body).toContain('ann:notes');
      expect(home.body).not.toContain('bob:notes');
      expect(home.body).not.toContain(child);
      const parent = await get(viewer.port, `/s/${encodeURIComponent('ann:notes')}`);
      expect(parent.status).toBe(200);
      expect(parent.body).not.toContain(encodeURIComponent(child));
      expect(parent.body).not.toContain(child);
    } finally {
      await viewer.close();
    }
  });

  it('options are checked when the viewer starts', async () => {
    await expect(startViewer({ store, port: 0, authorize: 'yes' as never })).rejects.toThrow(ViewerOptionsError);
    await expect(startViewer({ store, port: 0, authorizeTimeoutMs: -1 })).rejects.toThrow(ViewerOptionsError);
  });
});

describe('the inspector asks authorize', () => {
  it('with the actor id; the list shows only the actors allowed; a refused page is a 404 like an unknown one', async () => {
    let anns = '';
    const inspector = viewerInspector({ authorize: ({ request, sessionId }) => sessionId === null || (request.headers.get('x-user') === 'ann' && sessionId === anns) || { allow: false, status: 404 } });
    try {
      const url = await inspector.ready;
      const port = Number(new URL(url).port);
      const machine = createMachine({ initial: 'a', states: { a: { on: { go: 'b' } }, b: {} } });
      const first = createActor(machine, { inspect: inspector.inspect }).start();
      const second = createActor(machine, { inspect: inspector.inspect }).start();
      first.send({ type: 'go' });
      const [a, b] = [first.sessionId, second.sessionId];
      anns = a;
      const list = await get(port, '/', 'ann');
      expect(list.body).toContain(`/a/${encodeURIComponent(a)}`);
      expect(list.body).not.toContain(`/a/${encodeURIComponent(b)}`);
      expect((await get(port, `/a/${encodeURIComponent(a)}`, 'ann')).status).toBe(200);
      const refused = await get(port, `/a/${encodeURIComponent(b)}`, 'ann');
      const unknown = await get(port, `/a/${encodeURIComponent('x:99')}`, 'ann');
      expect(refused.status).toBe(404);
      expect(refused.body.replaceAll(encodeURIComponent(b), 'X')).toBe(unknown.body.replaceAll(encodeURIComponent('x:99'), 'X'));
      expect((await get(port, `/a/${encodeURIComponent(b)}/events`, 'ann')).status).toBe(404);
    } finally {
      await inspector.close();
    }
  });
});
