/**
 * `loopchart/postgres`: the session store for many processes on one PostgreSQL database.
 * Needs `pg` (and `@types/pg` for TypeScript) installed next to loopchart.
 */
export { PostgresSessionStore, type PostgresStoreOptions } from './stores/postgres.js';
