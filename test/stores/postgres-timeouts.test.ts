/**
 * A PostgreSQL store never waits for ever: a server that accepts a connection and says nothing
 * fails the call after `connectTimeoutMs`, and one that stops answering mid-session (here a TCP
 * proxy in front of the real server that starts dropping bytes, as a network partition does)
 * fails it after `queryTimeoutMs`, both as `StoreUnavailableError`. Once the server answers
 * again the store goes on, and nothing the timed-out call may have sent is half-applied.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/stores/errors.js';
import { PostgresSessionStore } from '../../src/stores/postgres.js';

const url = process.env.DATABASE_URL;

/** A TCP server on 127.0.0.1; `serve` gets each connection. */
async function listen(serve: (socket: Socket) => void): Promise<{ server: Server; port: number }> {
  const server = createServer(serve);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as { port: number }).port };
}

/** Settles within `ms` or fails the test. */
const within = <T>(ms: number, promise: Promise<T>): Promise<T> =>
  Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`still waiting after ${ms} ms`)), ms))]);

describe('PostgreSQL store timeouts', () => {
  const closers: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close().catch(() => {});
  });

  it('a server that accepts and never answers fails the call after connectTimeoutMs, as StoreUnavailableError', async () => {
    const sockets = new Set<Socket>();
    const { server, port } = await listen((socket) => void sockets.add(socket));
    closers.push(() => new Promise((resolve) => (sockets.forEach((socket) => socket.destroy()), server.close(resolve))));
    const store = new PostgresSessionStore({ connectionString: `postgres://nobody@127.0.0.1:${port}/none`, connectTimeoutMs: 200 });
    closers.push(() => store.close());
    const started = Date.now();
    const error = await within(5_000, store.load('s1').then(() => null, (error: unknown) => error));
    expect(StoreUnavailableError.isInstance(error)).toBe(true);
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it('bad timeouts are refused when the store is made', () => {
    expect(() => new PostgresSessionStore({ connectionString: 'postgres://x@127.0.0.1/x', queryTimeoutMs: 0 })).toThrow(/queryTimeoutMs must be a positive whole number/);
    expect(() => new PostgresSessionStore({ connectionString: 'postgres://x@127.0.0.1/x', connectTimeoutMs: 1.5 })).toThrow(/connectTimeoutMs/);
  });

  it.skipIf(!url)('a server that stops answering mid-session fails the call after queryTimeoutMs; once it answers again the store goes on', async () => {
    const target = new URL(url!);
    // The proxy forwards both ways until `stalled`, then drops every byte (a partition: nothing
    // is buffered to arrive later).
    let stalled = false;
    const { server, port } = await listen((client) => {
      const upstream = connect(Number(target.port || 5432), target.hostname);
      const forward = (from: Socket, to: Socket) => from.on('data', (chunk) => void (stalled || to.write(chunk)));
      forward(client, upstream);
      forward(upstream, client);
      const end = () => (client.destroy(), upstream.destroy());
      client.on('close', end).on('error', end);
      upstream.on('close', end).on('error', end);
    });
    closers.push(() => new Promise((resolve) => server.close(resolve)));
    const schema = `lc_timeouts_${process.pid}_${Date.now().toString(36)}`;
    const proxied = new URL(url!);
    proxied.hostname = '127.0.0.1';
    proxied.port = String(port);
    const store = new PostgresSessionStore({ connectionString: proxied.href, schema, queryTimeoutMs: 300, connectTimeoutMs: 1_000 });
    closers.push(() => store.close());
    const admin = new pg.Pool({ connectionString: url, max: 1 });
    closers.push(async () => (await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`), admin.end()));

    const first = { role: 'user' as const, content: 'one' };
    expect(await store.apply('s1', { expectedVersion: 0, state: { n: 1 }, append: [first] })).toBe(1);

    stalled = true;
    const started = Date.now();
    const error = await within(5_000, store.apply('s1', { expectedVersion: 1, state: { n: 2 }, append: [{ role: 'user', content: 'two' }] }).then(() => null, (error: unknown) => error));
    expect(StoreUnavailableError.isInstance(error)).toBe(true);
    expect(Date.now() - started).toBeLessThan(3_000);

    // A read in a transaction too (its ROLLBACK times out as well, and the connection is dropped).
    const read = await within(5_000, store.load('s1').then(() => null, (error: unknown) => error));
    expect(StoreUnavailableError.isInstance(read)).toBe(true);

    stalled = false;
    // The timed-out write never reached the server, so the session is where it was.
    expect(await within(5_000, store.load('s1'))).toMatchObject({ version: 1, messages: [first] });
    expect(await within(5_000, store.apply('s1', { expectedVersion: 1, state: { n: 2 }, append: [{ role: 'user', content: 'two' }] }))).toBe(2);
  });
});
