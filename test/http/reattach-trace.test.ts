/**
 * A request that opens a chat's run in flight from the store (a reattach in a process that does
 * not hold it) reads the decisions of that run only: the trace from the run's start, found with
 * one-entry reads, not the whole trace of the chat, whose earlier runs may be long. Shown on a real
 * SQLite file: the replay is the one a whole-trace read gives (the page's answer of this run
 * found), and what is read of the trace does not grow with the runs before.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createChatHandler, type ChatHandler } from '../../src/http.js';
import type { SessionStore } from '../../src/index.js';
import { FIRST_PAGE, runRecords } from '../../src/http/run-trace.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { chatAgent } from './fixtures/chat-agent.js';
import { loadSdk, page, userMessage, type UIMessage, answered } from './support.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-reattach-trace-'));
const handlers: ChatHandler[] = [];
const stores: SessionStore[] = [];
afterEach(async () => {
  await Promise.all(handlers.splice(0).map((handler) => handler.close()));
  await Promise.all(stores.splice(0).map((store) => store.close()));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** The store with the records each trace read of `sessionId` returned counted; `ignoreLimit`: a store that predates `limit`. */
function counted(store: SessionStore, sessionId: string, ignoreLimit = false) {
  const reads = { calls: 0, records: 0 };
  const spy: SessionStore = Object.assign(Object.create(store) as SessionStore, {
    readTrace: async (id: string, afterSeq?: number, limit?: number) => {
      const records = await store.readTrace!(id, afterSeq, ignoreLimit ? undefined : limit);
      if (id === sessionId) {
        reads.calls++;
        reads.records += records.length;
      }
      return records;
    },
  });
  return { spy, reads };
}

describe('a run in flight opened from the store', () => {
  it('reads the trace from the run\'s start: its answers are found, the runs before are not read', async () => {
    const path = join(root, 'chats.db');
    const store = new SqliteSessionStore({ path });
    stores.push(store);
    const { machine } = chatAgent([
      { text: 'Hello.' },
      { text: 'One.', toolCalls: [{ name: 'transfer', args: { amount: 1 } }] },
      { text: 'Two.', toolCalls: [{ name: 'transfer', args: { amount: 2 } }] },
      { text: 'Done.' },
    ]);
    const live = createChatHandler({ machine, store, aiSdk: 6 });
    handlers.push(live);
    const chat = page(await loadSdk(6), live, 'long');
    const first = userMessage('Hi.', 'u1');
    const hello = await chat.send([first]);
    // A long first run: 5,000 more entries of it (a model call's prompt is stored in its entry).
    await store.appendTrace('long', Array.from({ length: 5000 }, (_, n) => ({ type: 'note', at: n, run: 1, text: 'x'.repeat(1000) })));
    const second = userMessage('Send 1, then 2.', 'u2');
    const asked = await chat.send([first, hello, second]);
    // The page denies the first transfer; the run goes on to the second, which waits.
    const waiting = await chat.send([first, hello, second, answered(asked, false)], answered(asked, false));
    expect(waiting.metadata?.outcome).toBe('waiting');

    // Two other processes reattach: one on a store that reads from the run's start, one on a store that cannot (it ignores `limit`).
    const replays: UIMessage[] = [];
    const reads: Array<{ calls: number; records: number }> = [];
    for (const ignoreLimit of [false, true]) {
      const other = new SqliteSessionStore({ path });
      stores.push(other);
      const { spy, reads: read } = counted(other, 'long', ignoreLimit);
      const handler = createChatHandler({ machine, store: spy, aiSdk: 5 });
      handlers.push(handler);
      const reattached = page(await loadSdk(5), handler, 'long');
      replays.push((await reattached.resume())!);
      expect(reattached.errors).toEqual([]);
      reads.push(read);
      await handler.close();
    }
    // The same message; AI SDK 5 shows the answered call's request, from the answer its trace records.
    expect(JSON.parse(JSON.stringify(replays[0]!.parts))).toEqual(JSON.parse(JSON.stringify(replays[1]!.parts)));
    const requests = replays[0]!.parts.filter((p) => p.type === 'data-approval-request').map((p) => (p.data as { toolCallId: string }).toolCallId);
    expect(requests).toEqual(['call_2_0', 'call_3_0']);
    expect(replays[0]!.parts.find((p) => p.type === 'tool-transfer')).toMatchObject({ state: 'output-error', errorText: 'denied: the user did not approve this tool call' });
    // The whole trace: over 5,000 entries. From the run's start: the first page, one entry per seek (at most 2 x 53), and the run's own.
    expect(reads[1]!.records).toBeGreaterThan(5000);
    expect(reads[0]!.records).toBeLessThan(FIRST_PAGE + 1 + 2 * 53 + 50);
    expect(reads[0]!.calls).toBeLessThan(2 * 53 + 3);
  });
});

describe('runRecords, on SQLite', () => {
  it("gives each run's entries from its start, past other sessions' entries; an entry without a run, or a start that is not the run's, reads it all", async () => {
    const store = new SqliteSessionStore({ path: join(root, 'runs.db') });
    stores.push(store);
    // Runs of uneven length, another session writing between them (its entries take seqs too).
    const lengths = [700, 3, 1, 400, 50];
    for (const [index, length] of lengths.entries()) {
      const run = index + 1;
      await store.appendTrace('s', [{ type: 'run', run }, ...Array.from({ length }, (_, n) => ({ type: 'step', run, n }))]);
      await store.appendTrace('other', Array.from({ length: 37 * run }, () => ({ type: 'step', run: 99 })));
    }
    const all = await store.readTrace('s');
    for (const run of lengths.keys()) {
      const from = all.findIndex((record) => (record.entry as { type: string; run: number }).type === 'run' && (record.entry as { run: number }).run === run + 1);
      expect(await runRecords(store, 's', run + 1)).toEqual(all.slice(from));
    }
    // A fork's first entry has no run: the whole trace.
    await store.appendTrace('forked', [{ type: 'forked', from: 's', messages: 2 }, ...Array.from({ length: 300 }, () => ({ type: 'step', run: 1 })), { type: 'run', run: 2 }]);
    expect(await runRecords(store, 'forked', 2)).toHaveLength(302);
    // The first entry of the run is not its start (a trace of another shape): the whole trace.
    await store.appendTrace('odd', [...Array.from({ length: 300 }, () => ({ type: 'step', run: 1 })), { type: 'step', run: 2 }, { type: 'run', run: 2 }]);
    expect(await runRecords(store, 'odd', 2)).toHaveLength(302);
  });
});
