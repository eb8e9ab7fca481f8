import { InvalidConfigError } from '../errors.js';
import { isPostgresTables } from '../stores/beside-sessions.js';
import { MemorySessionStore } from '../stores/memory.js';
import type { SessionStore } from '../stores/session-store.js';
import { SqliteSessionStore } from '../stores/sqlite.js';
import { BackingMemory } from './memory-backing.js';
import type { MemoryBackend } from './memory-backend.js';
import { PostgresMemory } from './postgres-memory.js';
import { SqliteMemory } from './sqlite-memory.js';

/**
 * Why `store` cannot keep memory beside its sessions, or null: asked by `agentMemory` when it is
 * made, so such a store is refused there and not at every run's first model call.
 */
export function memoryStoreProblem(store: SessionStore): string | null {
  const kinds = 'memory is kept beside the sessions of a MemorySessionStore, a SqliteSessionStore or a PostgresSessionStore';
  // null or undefined (exportScope(undefined, …)) threw a raw TypeError from the hook's lookup below.
  if (typeof store !== 'object' || store === null) return kinds;
  // Memory is opened on a connection of its own: a second connection to ':memory:' is another, empty database.
  if (store instanceof SqliteSessionStore && store.path === ':memory:') return 'an in-memory SQLite store (:memory:) cannot keep memory beside its sessions: use a file';
  // Told by its hook, not by its class: importing PostgresSessionStore here would load pg for every store.
  if (store instanceof MemorySessionStore || store instanceof SqliteSessionStore || isPostgresTables(store)) return null;
  return kinds;
}

/**
 * Where a store's memory lives, beside its sessions: a `MemorySessionStore`'s backing (searched
 * in process), tables in a `SqliteSessionStore`'s file (FTS5, on a connection of their own), or
 * tables in a `PostgresSessionStore`'s schema (tsvector and GIN, on the store's pool). Similarity
 * is ranked in process on all three. The caller closes it.
 */
export function memoryBackend(store: SessionStore): MemoryBackend {
  if (store instanceof MemorySessionStore) return new BackingMemory(store.backing);
  if (store instanceof SqliteSessionStore && store.path !== ':memory:') return new SqliteMemory(store.path, store.driver);
  if (typeof store === 'object' && store !== null && isPostgresTables(store)) return new PostgresMemory(store);
  throw new InvalidConfigError(memoryStoreProblem(store) ?? 'memory cannot be kept beside this store');
}
