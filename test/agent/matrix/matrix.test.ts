/**
 * The conformance matrix, in process (issue 41): every feature scenario × every host that runs
 * in this process (the actor, runAgent, streamAgent, DurableSession on memory, a real SQLite file
 * and, with DATABASE_URL, PostgreSQL, AgentStepper, the chat handler through its Fetch handler,
 * the CLI through its `main`, the MCP server through the SDK's own client, schedules through
 * `startScheduler` on the SQLite file).
 * A cell declared tested runs the scenario and checks its result; a cell refused at run time
 * runs it and checks the refusal. With LOOPCHART_WRITE_MATRIX=1 the results are written to
 * docs/matrix.md (matrix-doc.test.ts checks that file against the declaration).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openSessionStore } from '../../../src/stores/open.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';
import type { SessionStore } from '../../../src/stores/session-store.js';
import { HOSTS, cellOf, renderMatrix, type CellResult, type HostId } from './cells.js';
import { cliHost, durableHost, inProcessHosts, type HostDriver } from './hosts.js';
import { mcpHost } from './mcp-host.js';
import { runCell } from './run-cell.js';
import { schedulesHost } from './schedules-host.js';
import { SCENARIOS } from './scenarios.js';

const DATABASE_URL = process.env.DATABASE_URL;
const dir = mkdtempSync(join(tmpdir(), 'loopchart-matrix-'));
const stores: Promise<SessionStore>[] = [];
/** One store per kind for the whole file, opened on first use; each run has a session of its own. */
const lazyStore = (open: () => Promise<SessionStore>) => {
  let store: Promise<SessionStore> | undefined;
  return () => (store ??= (stores.push(open()), stores.at(-1)!));
};
const memory = lazyStore(async () => new MemorySessionStore());
const sqlite = lazyStore(() => openSessionStore(join(dir, 'matrix.db')));
const pgSchema = `lc_matrix_${process.pid}_${Date.now().toString(36)}`;
const postgres = lazyStore(() => openSessionStore(DATABASE_URL!, { schema: pgSchema }));

/** The in-process drivers by host id; the durable ones open their store first. */
const drivers: Partial<Record<HostId, () => Promise<HostDriver>>> = {
  actor: async () => inProcessHosts.actor(),
  runAgent: async () => inProcessHosts.runAgent(),
  streamAgent: async () => inProcessHosts.streamAgent(),
  stepper: async () => inProcessHosts.stepper(),
  chat: async () => inProcessHosts.chat(),
  cli: async () => cliHost(dir),
  'durable-memory': async () => {
    const store = await memory();
    return durableHost(() => store, 'memory');
  },
  'durable-sqlite': async () => {
    const store = await sqlite();
    return durableHost(() => store, 'sqlite');
  },
  mcp: async () => mcpHost(),
  schedules: async () => schedulesHost(await sqlite()),
  ...(DATABASE_URL && {
    'durable-postgres': async () => {
      const store = await postgres();
      return durableHost(() => store, 'postgres');
    },
  }),
};

const results = new Map<string, CellResult>();

afterAll(async () => {
  for (const store of stores) await (await store).close();
  if (DATABASE_URL) {
    const pg = await import('pg');
    const admin = new pg.default.Pool({ connectionString: DATABASE_URL, max: 1 });
    await admin.query(`DROP SCHEMA IF EXISTS "${pgSchema}" CASCADE`).finally(() => admin.end());
  }
  rmSync(dir, { recursive: true, force: true });
  if (process.env.LOOPCHART_WRITE_MATRIX) writeFileSync(new URL('../../../docs/matrix.md', import.meta.url), renderMatrix(results));
});

const inProcess = HOSTS.filter((host) => host.runs === 'fast' || host.runs === 'postgres');

describe.each(inProcess)('$title', (host) => {
  const driver = drivers[host.id];
  const runnable = SCENARIOS.filter((scenario) => {
    const cell = cellOf(scenario.id, host.id);
    return cell.status === 'tested' || (cell.status === 'refused' && cell.verify);
  });
  if (!driver) {
    // PostgreSQL without DATABASE_URL: its cells keep their declared status in the page (CI runs them).
    for (const scenario of runnable) results.set(`${scenario.id}|${host.id}`, cellOf(scenario.id, host.id).status);
    it.skip(`${host.title}: not available here (set DATABASE_URL)`, () => {});
    return;
  }
  it.each(runnable)('$id: $title', async (scenario) => {
    const key = `${scenario.id}|${host.id}`;
    const cell = cellOf(scenario.id, host.id);
    results.set(key, 'failed');
    const { result, probe } = await runCell(scenario, await driver());
    if (cell.status === 'refused') cell.verify!(result);
    else scenario.check(result, probe);
    results.set(key, cell.status);
  });
});

it('every declared cell of a host this file runs is either run above or declared without a run', () => {
  for (const host of inProcess) {
    for (const scenario of SCENARIOS) {
      const cell = cellOf(scenario.id, host.id);
      if (cell.status !== 'tested' && !(cell.status === 'refused' && cell.verify)) results.set(`${scenario.id}|${host.id}`, cell.status);
    }
  }
  expect(results.size).toBe(inProcess.length * SCENARIOS.length);
});
