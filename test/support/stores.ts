import { MemorySessionStore, type SessionStore } from '../../src/index.js';

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
