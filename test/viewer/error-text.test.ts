/**
 * What a client of the viewer and of the inspector reads when a request fails, over real HTTP on
 * 127.0.0.1 with a real SQLite file behind a store whose reads throw an error holding a secret (a
 * connection string, as a database driver reports one). Before, the 500 page printed the error's
 * message (`error.message` in the viewer, `String(error)` in the inspector), a session page showed
 * the store's error as the session's, and a live page's `failure` event carried it. Now each reads
 * "Internal error" and a reference, and the error is reported on the server under it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createActor, createMachine } from 'xstate';
import { createAgentMachine } from '../../src/index.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../src/sqlite.js';
import type { SessionStore } from '../../src/stores/session-store.js';
import { scriptedModel } from '../../src/testing.js';
import { startViewer, viewerInspector, type RunningViewer } from '../../src/viewer.js';
import { get } from './support.js';

const SECRET = 'postgres://admin:hunter2-s3cret@db.internal:5432/prod';
const dir = mkdtempSync(join(tmpdir(), 'loopchart-viewer-error-text-'));
let sqlite: SqliteSessionStore;

/** The SQLite store, whose reads named in `failing` throw what a driver would: an error holding the secret. */
function failingStore(inner: SessionStore, failing: Set<string>): SessionStore {
  const store = Object.create(inner) as SessionStore;
  for (const name of ['load', 'list', 'readTrace'] as const) {
    const read = (inner[name] as (...args: unknown[]) => unknown).bind(inner);
    (store as unknown as Record<string, unknown>)[name] = (...args: unknown[]) => {
      if (failing.has(name)) throw new Error(`connection to ${SECRET} refused`);
      return read(...args);
    };
  }
  return store;
}

/** Everything written to console.error meanwhile (what the server reports), as one text. */
function reports() {
  const spy = vi.spyOn(console, 'error').mockImplementation(() => {});
  return { text: () => spy.mock.calls.map((call) => call.map((part) => (part instanceof Error ? `${part.message}` : String(part))).join(' ')).join('\n') };
}

/** The reference an answer names (8 hex digits). */
const referenceIn = (body: string): string => /reference ([0-9a-f]{8})/.exec(body)?.[1] ?? 'none';

beforeAll(async () => {
  sqlite = new SqliteSessionStore({ path: join(dir, 'store.db') });
  const session = await DurableSession.open({ machine: createAgentMachine({ model: scriptedModel([{ text: 'Hi there' }]) }), store: sqlite, sessionId: 'notes' });
  session.send({ type: 'input', message: 'Hello' });
  await session.whenIdle();
  await session.close();
});
afterEach(() => void vi.restoreAllMocks());
afterAll(async () => {
  await sqlite?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('a failing store, seen through the viewer', () => {
  const failing = new Set<string>();
  let viewer: RunningViewer;
  beforeAll(async () => {
    viewer = await startViewer({ store: failingStore(sqlite, failing), port: 0, pollMs: 20 });
  });
  afterAll(() => viewer?.close());
  afterEach(() => failing.clear());

  it('a request that fails is a 500 "Internal error" with a reference; the error is reported under it', async () => {
    const reported = reports();
    failing.add('list');
    const home = await get(viewer.port, '/');
    expect(home.status).toBe(500);
    expect(home.body).not.toContain('hunter2');
    expect(home.body).toContain('Internal error');
    expect(referenceIn(home.body)).not.toBe('none');
    expect(reported.text()).toContain(`reference ${referenceIn(home.body)}`);
    expect(reported.text()).toContain(SECRET);
  });

  it("a session page whose row the store cannot read shows a reference, not the store's error", async () => {
    const reported = reports();
    failing.add('load');
    const page = await get(viewer.port, '/s/notes');
    expect(page.status).toBe(500);
    expect(page.body).not.toContain('hunter2');
    const reference = referenceIn(page.body);
    expect(reference).not.toBe('none');
    expect(reported.text()).toContain(`reference ${reference}`);
    expect(reported.text()).toContain(SECRET);
  });

  it("a live page whose store fails gets a failure event with a reference, not the store's error", async () => {
    const reported = reports();
    expect((await get(viewer.port, '/s/notes')).status).toBe(200);
    const controller = new AbortController();
    const events = await fetch(`http://127.0.0.1:${viewer.port}/s/notes/events`, { signal: controller.signal });
    const reader = events.body!.getReader();
    let text = '';
    const deadline = Date.now() + 5_000;
    failing.add('readTrace');
    try {
      while (!text.includes('event: failure') && Date.now() < deadline) {
        const read = await Promise.race([reader.read(), new Promise<null>((resolve) => setTimeout(() => resolve(null), deadline - Date.now()))]);
        if (read === null || read.done) break;
        text += new TextDecoder().decode(read.value);
      }
    } finally {
      controller.abort();
    }
    const failure = text.slice(text.indexOf('event: failure'));
    expect(failure).toContain('event: failure');
    expect(text).not.toContain('hunter2');
    expect(reported.text()).toContain(`reference ${referenceIn(failure)}`);
    expect(reported.text()).toContain(SECRET);
  });
});

describe('the inspector', () => {
  it('a page that cannot be made is a 500 "Internal error" with a reference; the error is reported under it', async () => {
    const reported = reports();
    const inspector = viewerInspector();
    try {
      const url = new URL(await inspector.ready);
      // An agent-shaped context whose usage cannot be written out: the page fails as it is made.
      const sessionUsage = {
        toJSON() {
          throw new Error(`cannot serialize: ${SECRET}`);
        },
      };
      const machine = createMachine({ context: { brain: { value: 'Start', context: { history: [], pending: [], turnsTaken: 0, contextTokens: 0, totalToolCalls: 0 } }, runIndex: 0, sessionUsage } });
      const actor = createActor(machine, { inspect: inspector.inspect }).start();
      const page = await get(Number(url.port), `/a/${encodeURIComponent(actor.sessionId)}`);
      actor.stop();
      expect(page.status).toBe(500);
      expect(page.body).not.toContain('hunter2');
      expect(page.body).toContain('Internal error');
      expect(reported.text()).toContain(`reference ${referenceIn(page.body)}`);
      expect(reported.text()).toContain(SECRET);
    } finally {
      await inspector.close();
    }
  });
});
