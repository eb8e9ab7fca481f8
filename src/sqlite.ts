/**
 * `loopchart/sqlite`: the embedded session store. It runs on the built-in `node:sqlite`
 * (Node 22.13+) or on better-sqlite3 (an optional dependency, for Node 20); neither loads
 * before a store is opened.
 */
export { DEFAULT_SQLITE_PATH, SqliteSessionStore, type SqliteStoreOptions } from './stores/sqlite.js';
export { defaultSqliteDriver, SqliteDriverUnavailableError, type SqliteDriverName } from './stores/sqlite-driver.js';
