/**
 * A call in doubt through a restart of a stdio server: the first server process is killed while
 * the served agent's tool (inDoubt: 'ask') runs; a second process on the same SQLite file gets the
 * repeat (same idempotency key) and asks its client, through elicitation, whether to run it again.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CallToolResult, ElicitResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { until, useStdioServer } from './support.js';

const server = useStdioServer(fileURLToPath(new URL('./fixtures/in-doubt-server.ts', import.meta.url)));

/** A server process on `db` and a client to it; `starts` counts the tool's starts in this process. */
async function start(db: string, answer?: (message: string) => ElicitResult) {
  const started = await server.start(db, { CHARGE_MS: '300' }, answer);
  return { ...started, starts: () => started.stderr().split('charge started').length - 1 };
}

const key = (name: string) => ({ 'loopchart/idempotencyKey': name });
const text = (result: CallToolResult) => (result.content[0] as { text: string }).text;

/** The first process starts the charge and is killed during it (CHARGE_MS is long there: it never answers). */
async function killedDuringTheCharge(db: string, name: string): Promise<void> {
  const first = await server.start(db);
  const call = first.client.callTool({ name: 'cashier', arguments: { task: 'charge the order' }, _meta: key(name) }).catch(() => 'gone');
  expect(await until(() => first.stderr().includes('charge started'), 20_000)).toBe(true);
  process.kill(first.pid, 'SIGKILL');
  expect(await call).toBe('gone');
  await first.client.close();
}

describe('a call in doubt after the server restarted', () => {
  it('the repeat asks its client whether to run the call again; yes runs it again and answers its result', async () => {
    const db = join(server.dir, 'rerun.db');
    await killedDuringTheCharge(db, 'order-1');
    const second = await start(db, () => ({ action: 'accept', content: { approve: true } }));
    try {
      const started = Date.now();
      // Before: nobody was asked; the call was held until callTimeoutMs (15 s here), then the run cancelled.
      const result = (await second.client.callTool({ name: 'cashier', arguments: { task: 'charge the order' }, _meta: key('order-1') }, undefined, { timeout: 60_000 })) as CallToolResult;
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(second.asked).toHaveLength(1);
      expect(second.asked[0]).toMatch(/charge_card.*"cents":500.*again/);
      expect(result.isError).toBeFalsy();
      expect(text(result)).toBe('result: charged 500');
      expect(second.starts()).toBe(1);
    } finally {
      await second.client.close();
    }
  }, 60_000);

  it('no runs nothing again: the model reads that the call failed, with the reason given', async () => {
    const db = join(server.dir, 'fail.db');
    await killedDuringTheCharge(db, 'order-2');
    const second = await start(db, () => ({ action: 'accept', content: { approve: false, reason: 'I see the charge on my statement' } }));
    try {
      const result = (await second.client.callTool({ name: 'cashier', arguments: { task: 'charge the order' }, _meta: key('order-2') }, undefined, { timeout: 60_000 })) as CallToolResult;
      expect(second.asked).toHaveLength(1);
      expect(text(result)).toMatch(/^result: .*I see the charge on my statement/);
      expect(second.starts()).toBe(0);
    } finally {
      await second.client.close();
    }
  }, 60_000);

  it('a client that cannot be asked (no elicitation): the call is not run again, and the reason says why', async () => {
    const db = join(server.dir, 'unasked.db');
    await killedDuringTheCharge(db, 'order-3');
    const second = await start(db);
    try {
      const result = (await second.client.callTool({ name: 'cashier', arguments: { task: 'charge the order' }, _meta: key('order-3') }, undefined, { timeout: 60_000 })) as CallToolResult;
      expect(text(result)).toMatch(/^result: .*cannot be asked/);
      expect(second.starts()).toBe(0);
    } finally {
      await second.client.close();
    }
  }, 60_000);
});
