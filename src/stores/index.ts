export type { SessionStore, SessionSummary, StepWrite, StoredSession } from './session-store.js';
export { StepWriteSchema } from './session-store.js';
export {
  CorruptSessionError,
  InvalidWriteError,
  SessionBusyError,
  SessionNotFoundError,
  StoreBusyError,
  StoreSchemaVersionError,
  InvalidSessionIdError,
  MAX_SESSION_ID_LENGTH,
  StoreCorruptError,
  StoreError,
  StoreFullError,
  StoreUnavailableError,
} from './errors.js';
export { sessionIdProblem } from './step.js';
export type { CorruptPart } from './errors.js';
export { MemoryBacking, MemorySessionStore } from './memory.js';
export { DEFAULT_SQLITE_PATH, SqliteSessionStore } from './sqlite.js';
export type { SqliteStoreOptions } from './sqlite.js';
export { PostgresSessionStore } from './postgres.js';
export type { PostgresStoreOptions } from './postgres.js';
export { openSessionStore } from './open.js';
