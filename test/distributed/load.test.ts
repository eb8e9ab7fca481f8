/**
 * Many sessions on two worker processes behind a load balancer, against a real Restate server:
 * 200 concurrent sessions complete while one worker is SIGKILLed mid-run (its sessions finish on
 * the other); then the server itself is SIGKILLed mid-run and restarted (every session finishes).
 * Every transcript equals the same session run in one process on SQLite; a tool side effect
 * repeats only for a call that was in flight in the killed worker, with the same key.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Message, Outcome } from '../../src/index.js';
import { startBalancer, type Balancer } from './support/balancer.js';
import { IngressClient } from './support/ingress.js';
import { referenceTranscripts } from './support/reference.js';
import { RestateServer, waitFor } from './support/server.js';
import { SERVER_BINARY, readToolLog, type ToolLine } from './support/suite.js';
import { startWorker, type Worker } from './support/workers.js';

const SESSIONS = 200;
/** The server-kill round: fewer sessions, the point is the restart. */
const SERVER_ROUND = 60;
/** The scripted model asks for three tool calls per session. */
const CALLS_PER_SESSION = 3;

interface Summary {
  outcome: Outcome | null;
}

describe.skipIf(!SERVER_BINARY)('Restate: load and crashes (real server, two real workers)', () => {
  let dir: string;
  let toolLog: string;
  let server: RestateServer;
  let workers: Worker[];
  let balancer: Balancer;
  let client: IngressClient;
  const lines = (prefix: string): ToolLine[] => readToolLog(readFileSync(toolLog, 'utf8')).filter((line) => line.key.startsWith(prefix));

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'loopchart-restate-load-'));
    toolLog = join(dir, 'tools.log');
    server = await RestateServer.start(SERVER_BINARY!);
    workers = await Promise.all([0, 1].map(() => startWorker({ TOOL_LOG: toolLog, MAX_DELAY_MS: '20' })));
    balancer = await startBalancer(workers.map((worker) => worker.url));
    await server.register(balancer.url);
    client = new IngressClient(server.ingressUrl);
  });

  afterAll(async () => {
    await Promise.all((workers ?? []).map((worker) => worker.kill('SIGTERM')));
    await balancer?.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Every key ran once, except keys first run by `killedPid`: those at most twice, the repeat elsewhere. */
  function expectNoRepeatsBut(all: ToolLine[], killedPid: number | undefined): string[] {
    const byKey = new Map<string, ToolLine[]>();
    for (const line of all) byKey.set(line.key, [...(byKey.get(line.key) ?? []), line]);
    const repeated = [...byKey].filter(([, runs]) => runs.length > 1);
    for (const [key, runs] of repeated) {
      expect(runs.length, key).toBe(2);
      expect(runs[0]!.pid, key).toBe(killedPid);
      expect(runs[1]!.pid, key).not.toBe(killedPid);
      expect(runs[1]!.line, key).toBe(runs[0]!.line);
    }
    return repeated.map(([key]) => key);
  }

  /** How many sessions have had some but not all of their tool calls, every one of them on `pid`. */
  function partwayOn(pid: number, all: ToolLine[]): number {
    const bySession = new Map<string, ToolLine[]>();
    for (const line of all) {
      const session = line.key.split(':')[0]!;
      bySession.set(session, [...(bySession.get(session) ?? []), line]);
    }
    return [...bySession.values()].filter((runs) => runs.length < CALLS_PER_SESSION && runs.every((line) => line.pid === pid)).length;
  }

  async function expectTranscriptsMatch(ids: string[], prompt: (id: string) => string): Promise<void> {
    const reference = await referenceTranscripts(dir, new Map(ids.map((id) => [id, [prompt(id)]])));
    const transcripts = await Promise.all(ids.map((id) => client.ok<Message[]>(id, 'transcript')));
    ids.forEach((id, i) => expect(transcripts[i], id).toEqual(reference.get(id)));
  }

  it(`${SESSIONS} concurrent sessions across 2 workers complete, one worker SIGKILLed mid-run; transcripts equal SQLite in one process`, async () => {
    const ids = Array.from({ length: SESSIONS }, (_, i) => `load-${i}`);
    const prompt = (id: string) => `task ${id}`;
    const started = Date.now();
    const replies = Promise.all(ids.map((id) => client.ok<Summary>(id, 'send', { message: prompt(id) }, 110_000)));
    const victim = workers[0]!;
    const killedPid = victim.child.pid!;
    // Mid-run: a third of all tool calls done, and the victim partway through several sessions
    // (a count alone can land when the victim has only finished or unstarted sessions left, and
    // then no session changes worker).
    const midRun = async () => {
      const all = lines('load-');
      if (all.length < SESSIONS) return undefined;
      return partwayOn(killedPid, all) >= 3 ? true : undefined;
    };
    await waitFor('a third of the tool calls, the victim partway through sessions', midRun, 60_000, 10);
    await victim.kill('SIGKILL');
    const results = await replies;
    const elapsed = Date.now() - started;
    expect(results.every((reply) => reply.outcome?.type === 'Completed')).toBe(true);
    const all = lines('load-');
    // Both workers did work, and the survivor finished what the victim had.
    expect(new Set(all.map((line) => line.pid)).size).toBe(2);
    expect(new Set(all.map((line) => line.key)).size).toBe(SESSIONS * CALLS_PER_SESSION);
    const repeated = expectNoRepeatsBut(all, killedPid);
    // Sessions the victim had worked on were finished by the survivor.
    const pidsBySession = new Map<string, Set<number>>();
    for (const line of all) {
      const session = line.key.split(':')[0]!;
      pidsBySession.set(session, (pidsBySession.get(session) ?? new Set()).add(line.pid));
    }
    expect([...pidsBySession.values()].filter((pids) => pids.has(killedPid) && pids.size === 2).length).toBeGreaterThan(0);
    await expectTranscriptsMatch(ids, prompt);
    console.log(
      `load: ${SESSIONS} sessions in ${elapsed} ms (${((SESSIONS * 1000) / elapsed).toFixed(1)}/s), ` +
        `${repeated.length} in-flight tool calls re-run after the kill; server RSS ${(server.rssBytes() / 2 ** 20).toFixed(0)} MiB, ` +
        `data dir ${(server.dataDirBytes() / 2 ** 20).toFixed(0)} MiB`,
    );
    workers[0] = await startWorker({ TOOL_LOG: toolLog, MAX_DELAY_MS: '20', PORT: new URL(victim.url).port });
  });

  it('the server SIGKILLed mid-run and restarted: every session finishes, nothing finished runs again', async () => {
    const ids = Array.from({ length: SERVER_ROUND }, (_, i) => `server-${i}`);
    const prompt = (id: string) => `job ${id}`;
    // Enqueued (durable once accepted), so the clients need no connection across the restart.
    const invocations = await Promise.all(ids.map((id) => client.enqueue(id, 'send', { message: prompt(id) })));
    await waitFor('a third of the tool calls', async () => (lines('server-').length >= SERVER_ROUND ? true : undefined), 60_000);
    await server.kill('SIGKILL');
    const before = lines('server-').length;
    await server.start();
    const results = await Promise.all(invocations.map((id) => client.attach<Summary>(id, 110_000)));
    expect(results.every((reply) => reply.outcome?.type === 'Completed')).toBe(true);
    const all = lines('server-');
    expect(before).toBeLessThan(SERVER_ROUND * CALLS_PER_SESSION);
    expect(new Set(all.map((line) => line.key)).size).toBe(SERVER_ROUND * CALLS_PER_SESSION);
    // With the server gone, a worker's step may finish without its result reaching the journal:
    // that step, and only such, runs again with the same key (no worker pid is to blame here).
    const byKey = new Map<string, number>();
    for (const line of all) byKey.set(line.key, (byKey.get(line.key) ?? 0) + 1);
    expect([...byKey.values()].every((count) => count <= 2)).toBe(true);
    await expectTranscriptsMatch(ids, prompt);
  });
});
