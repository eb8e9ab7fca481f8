import { InvalidConfigError } from '../errors.js';
import { MemorySessionStore } from '../stores/memory.js';
import type { SessionStore } from '../stores/session-store.js';
import { BackingMemory } from './memory-backing.js';
import type { MemoryBackend } from './memory-backend.js';

/**
 * Where a store's memory lives, beside its sessions: a `MemorySessionStore`'s backing, tables in a
 * `SqliteSessionStore`'s file (FTS5), tables in a `PostgresSessionStore`'s schema (full-text
 * search). The caller closes it.
 */
export function memoryBackend(store: SessionStore): MemoryBackend {
  if (store instanceof MemorySessionStore) return new BackingMemory(store.backing);
  throw new InvalidConfigError('memory is kept beside the sessions of a MemorySessionStore, a SqliteSessionStore or a PostgresSessionStore');
}
