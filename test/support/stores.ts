import { MemorySessionStore, type SessionStore } from '../../src/index.js';
import { decodeRow } from '../../src/sessions/session-row.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';

/**
 * A store of the user's own: the `SessionStore` contract only, over a memory store, so none of
 * loopchart's own store classes (what memory and schedules are kept beside).
 */
export function foreignStore(): SessionStore {
  const inner = new MemorySessionStore();
  return {
    load: (id) => inner.load(id),
    apply: (id, write) => inner.apply(id, write),
    list: () => inner.list(),
    journalToolResult: (id, turn, result) => inner.journalToolResult(id, turn, result),
    journaledToolResults: (id, turn) => inner.journaledToolResults(id, turn),
    close: () => inner.close(),
  };
}

/** Session `sessionId` as stored in the SQLite file `path` (read on a connection of its own), decoded. */
export async function storedSession(path: string, sessionId: string) {
  const store = new SqliteSessionStore({ path });
  try {
    const row = (await store.load(sessionId))!;
    return decodeRow(sessionId, row.state, row.messages);
  } finally {
    await store.close();
  }
}
