/**
 * Store errors are typed: a corrupt SQLite file, a full database and an unreachable PostgreSQL
 * server surface as loopchart store errors (a `code`, the driver's error as `cause`), never as
 * a raw SqliteError or pg error. Real files, a real size limit, a real refused connection.
 */
import { closeSync, mkdtempSync, openSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LoopchartError } from '../../src/errors.js';
import type { Message } from '../../src/schemas.js';
import { StoreCorruptError, StoreError, StoreFullError, StoreUnavailableError } from '../../src/stores/errors.js';
import { PostgresSessionStore } from '../../src/stores/postgres.js';
import type { SqliteConnection } from '../../src/stores/sqlite-driver.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-store-errors-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let files = 0;
const freshPath = () => join(root, `db-${files++}.db`);
const user = (content: string): Message => ({ role: 'user', content });

async function failure(work: () => unknown): Promise<unknown> {
  try {
    await work();
  } catch (error) {
    return error;
  }
  throw new Error('expected a failure');
}

function expectStoreError(error: unknown, type: typeof StoreError, code: string, mentions: string): void {
  expect(error).toBeInstanceOf(type);
  expect(error).toBeInstanceOf(LoopchartError);
  expect(LoopchartError.isInstance(error)).toBe(true);
  expect((error as LoopchartError).code).toBe(code);
  expect((error as Error).message).toContain(mentions);
  // The driver's own error is kept for whoever debugs it.
  expect((error as Error).cause).toBeInstanceOf(Error);
  expect((error as Error).cause).not.toBeInstanceOf(LoopchartError);
}

describe('SQLite', () => {
  it('a file that is not a database: StoreCorruptError when the store opens it', async () => {
    const path = freshPath();
    writeFileSync(path, Buffer.alloc(8192, 'not a database, just some text. '));
    const error = await failure(() => new SqliteSessionStore({ path }));
    expectStoreError(error, StoreCorruptError, 'StoreCorrupt', path);
  });

  it('a database whose pages were overwritten: StoreCorruptError from the calls that read them', async () => {
    const path = freshPath();
    const store = new SqliteSessionStore({ path });
    for (let i = 0; i < 40; i++) await store.apply(`s${i}`, { expectedVersion: 0, state: i, append: [user('x'.repeat(2000))] });
    await store.close();
    // Keep the header page (the file still says "SQLite format 3"), wreck every page after it.
    const size = statSync(path).size;
    const fd = openSync(path, 'r+');
    const page = 4096;
    for (let offset = page; offset < size; offset += page) writeSync(fd, Buffer.alloc(page, 0xa5), 0, page, offset);
    closeSync(fd);
    const error = await failure(async () => {
      const reopened = new SqliteSessionStore({ path });
      try {
        await reopened.list();
        await reopened.load('s1');
      } finally {
        await reopened.close();
      }
    });
    expectStoreError(error, StoreCorruptError, 'StoreCorrupt', path);
  });

  it('a full database (max_page_count): StoreFullError, nothing of the step kept, the store usable afterwards', async () => {
    const path = freshPath();
    const store = new SqliteSessionStore({ path });
    await store.apply('s', { expectedVersion: 0, state: 'one', append: [user('a')] });
    const before = await store.load('s');
    // SQLite's own size cap: what a full disk does to a write, without filling a disk.
    const db = (store as unknown as { db: SqliteConnection }).db;
    const pages = (db.prepare('PRAGMA page_count').get() as { page_count: number }).page_count;
    db.exec(`PRAGMA max_page_count = ${pages}`);
    const error = await failure(() => store.apply('s', { expectedVersion: 1, state: 'two', append: [user('z'.repeat(200_000))] }));
    expectStoreError(error, StoreFullError, 'StoreFull', path);
    expect((error as Error).message).toContain('nothing of this write was kept');
    expect(await store.load('s')).toEqual(before);
    db.exec('PRAGMA max_page_count = 1073741823');
    expect(await store.apply('s', { expectedVersion: 1, state: 'two', append: [user('b')] })).toBe(2);
    await store.close();
  });

  it('a path that cannot be opened: StoreUnavailableError', async () => {
    const error = await failure(() => new SqliteSessionStore({ path: root })); // a folder, not a file
    expectStoreError(error, StoreUnavailableError, 'StoreUnavailable', root);
  });
});

describe('PostgreSQL', () => {
  /** A port nothing listens on: bound once to learn a free one, then closed. */
  async function closedPort(): Promise<number> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    await new Promise((resolve) => server.close(resolve));
    return port;
  }

  it('a server that refuses the connection: StoreUnavailableError on every call, no password in the message', async () => {
    const port = await closedPort();
    const store = new PostgresSessionStore({ connectionString: `postgres://app:s3cret@127.0.0.1:${port}/db`, schema: 'lc_unreachable' });
    const calls: Array<() => Promise<unknown>> = [
      () => store.load('s'),
      () => store.apply('s', { expectedVersion: 0, state: 1 }),
      () => store.list(),
      () => store.journalToolResult('s', 'k', { role: 'tool', toolCallId: 'c', toolName: 't', content: 'x' }),
      () => store.journaledToolResults('s', 'k'),
    ];
    for (const call of calls) {
      const error = await failure(call);
      expectStoreError(error, StoreUnavailableError, 'StoreUnavailable', `cannot reach the database at postgres://app:***@127.0.0.1:${port}/db: `);
      expect((error as Error).message).toContain('ECONNREFUSED');
      expect((error as Error).message).not.toContain('s3cret');
    }
    await store.close();
  });

  it('a password in the query string (?password=, ?sslpassword=) is masked too; it was printed as given', async () => {
    const port = await closedPort();
    const store = new PostgresSessionStore({ connectionString: `postgresql://app@127.0.0.1:${port}/db?sslmode=disable&password=s3cret&sslpassword=k3y`, schema: 'lc_unreachable' });
    const error = await failure(() => store.list());
    expectStoreError(error, StoreUnavailableError, 'StoreUnavailable', `cannot reach the database at postgresql://app@127.0.0.1:${port}/db?sslmode=disable&password=***&sslpassword=***: `);
    expect((error as Error).message).not.toMatch(/s3cret|k3y/);
    await store.close();
  });

  const url = process.env.DATABASE_URL;
  it.skipIf(!url)('a server error that is not the store contract is a StoreError with the SQLSTATE; a closed store says so', async () => {
    const store = new PostgresSessionStore({ connectionString: url!, schema: `lc_errors_${process.pid}` });
    try {
      await store.apply('s', { expectedVersion: 0, state: 1 });
      // Break the layout behind the store's back: the next step's statement fails in the server.
      const admin = new PostgresSessionStore({ connectionString: url!, schema: 'unused' });
      const pool = (admin as unknown as { pool: { query(sql: string): Promise<unknown> } }).pool;
      await pool.query(`ALTER TABLE "lc_errors_${process.pid}".messages RENAME TO gone`);
      const error = await failure(() => store.load('s'));
      expectStoreError(error, StoreError, 'StoreFailed', '42P01');
      await pool.query(`DROP SCHEMA "lc_errors_${process.pid}" CASCADE`);
      await admin.close();
    } finally {
      await store.close();
    }
    const closed = await failure(() => store.list());
    expect(closed).toBeInstanceOf(StoreError);
    expect((closed as StoreError).code).toBe('StoreClosed');
  });
});
