/**
 * Schedules on Restate (`restateSchedules`, `restateScheduleClient`) against a real Restate server
 * and a real worker process: a tick is a delayed call the server keeps, fired once even when it
 * is delivered twice or the worker was killed before its due time.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Message } from '../../src/index.js';
import { restateScheduleClient, type RestateScheduleClient } from '../../src/restate.js';
import { InvalidScheduleError, ScheduleNotFoundError } from '../../src/schedules.js';
import { main } from '../../src/cli/main.js';
import { MemorySessionStore } from '../../src/stores/memory.js';
import { StoreError } from '../../src/stores/errors.js';
import { startViewer } from '../../src/viewer.js';
import { IngressClient } from './support/ingress.js';
import { RestateServer, freePort, waitFor } from './support/server.js';
import { SERVER_BINARY, readToolLog } from './support/suite.js';
import { startWorker, type Worker } from './support/workers.js';

const SCHEDULE_WORKER = fileURLToPath(new URL('./fixtures/schedule-worker.ts', import.meta.url));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(!SERVER_BINARY)('schedules on Restate (real server, real worker)', () => {
  let server: RestateServer;
  let worker: Worker;
  let workerPort: number;
  let dir: string;
  let toolLog: string;
  let schedules: RestateScheduleClient;
  let sessions: IngressClient;
  let scheduleObject: IngressClient;
  const startOurWorker = () => startWorker({ TOOL_LOG: toolLog, PORT: String(workerPort) }, SCHEDULE_WORKER);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'loopchart-restate-schedules-'));
    toolLog = join(dir, 'tools.log');
    server = await RestateServer.start(SERVER_BINARY!);
    workerPort = await freePort();
    worker = await startOurWorker();
    await server.register(worker.url);
    schedules = restateScheduleClient(server.ingressUrl);
    sessions = new IngressClient(server.ingressUrl);
    scheduleObject = new IngressClient(server.ingressUrl, 'loopchartSchedule');
  });

  afterAll(async () => {
    await worker?.kill('SIGTERM');
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The inputs the session got: its user messages' texts. */
  const inputsOf = async (session: string) =>
    (await sessions.ok<Message[]>(session, 'transcript')).filter((message) => message.role === 'user').map((message) => message.content);
  const appendsOf = (session: string) =>
    existsSync(toolLog) ? readToolLog(readFileSync(toolLog, 'utf8')).filter((line) => line.key.startsWith(`${session}:`)) : [];

  it('a one-off due in 1 s fires once: the session gets its input; a second call for the same tick does nothing', async () => {
    const at = Date.now() + 1_000;
    const made = await schedules.schedule({ id: 'once', session: 'once-session', input: 'tick once', at });
    expect(made).toMatchObject({ id: 'once', session: 'once-session', agent: 'loopchartSession', nextAt: new Date(at), runs: 0, lastOutcome: null });
    expect(await inputsOf('once-session')).toEqual([]);
    await waitFor('the tick', async () => ((await schedules.get('once'))?.runs === 1 ? true : undefined), 10_000, 100);
    await waitFor('the run', async () => ((await sessions.ok<{ running: boolean; turnsTaken: number }>('once-session', 'state')).turnsTaken === 3 ? true : undefined), 10_000, 100);
    expect(Date.now()).toBeGreaterThanOrEqual(at);
    expect(await schedules.get('once')).toMatchObject({ runs: 1, lastOutcome: 'Sent', nextAt: null });
    // The same tick delivered again (a duplicate): its due time is no longer the schedule's next.
    expect(await scheduleObject.ok('once', 'fire', { due: at })).toEqual({ fired: false });
    await sleep(300);
    expect(await inputsOf('once-session')).toEqual(['tick once']);
    expect(appendsOf('once-session')).toHaveLength(3);
    expect((await schedules.list()).map((s) => s.id)).toContain('once');
  });

  it('an every-second schedule fires twice in ~2.5 s; paused it stops, resumed it goes on, deleted it is gone', async () => {
    const started = Date.now();
    await schedules.schedule({ id: 'every', session: 'every-session', input: 'tick every', every: 1_000 });
    await waitFor('two ticks', async () => ((await inputsOf('every-session')).length >= 2 ? true : undefined), 5_000, 100);
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(2_000);
    expect(elapsed).toBeLessThan(3_500);
    const paused = await schedules.pause('every');
    expect(paused.paused).toBe(true);
    const ran = (await schedules.get('every'))!.runs;
    expect(ran).toBeGreaterThanOrEqual(2);
    await sleep(2_200);
    // The tick a pause left pending arrived and did nothing.
    expect((await schedules.get('every'))!.runs).toBe(ran);
    expect(await inputsOf('every-session')).toEqual(Array.from({ length: ran }, () => 'tick every'));
    // Resumed, it fires again from the next second after now.
    expect((await schedules.resume('every')).paused).toBe(false);
    await waitFor('a tick after the resume', async () => ((await schedules.get('every'))!.runs === ran + 1 ? true : undefined), 3_000, 100);
    await schedules.delete('every');
    expect(await schedules.get('every')).toBeUndefined();
    expect((await schedules.list()).map((s) => s.id)).not.toContain('every');
    await expect(schedules.pause('every')).rejects.toSatisfy((error) => ScheduleNotFoundError.isInstance(error));
  });

  it("a tick due while the session's run goes: overlap 'skip' sends nothing, 'queue' runs it after that run", async () => {
    const run = await sessions.enqueue('busy-session', 'send', { message: 'slow run' });
    await waitFor('the run to be in flight', async () => ((await sessions.ok<{ running: boolean }>('busy-session', 'state')).running ? true : undefined));
    await schedules.schedule({ id: 'skip', session: 'busy-session', input: 'tick skipped', at: Date.now() + 100, overlap: 'skip' });
    await schedules.schedule({ id: 'queue', session: 'busy-session', input: 'tick queued', at: Date.now() + 100, overlap: 'queue' });
    const ticked = (id: string) =>
      waitFor(`the tick of ${id}`, async () => {
        const info = await schedules.get(id);
        return info?.lastOutcome ? info : undefined;
      }, 5_000, 100);
    expect(await ticked('skip')).toMatchObject({ lastOutcome: 'Skipped', runs: 0, nextAt: null });
    expect(await ticked('queue')).toMatchObject({ lastOutcome: 'Sent', runs: 1, nextAt: null });
    expect((await sessions.ok<{ running: boolean }>('busy-session', 'state')).running).toBe(true);
    await sessions.ok('busy-session', 'cancel', {});
    await sessions.attach(run);
    await waitFor('the queued run', async () => ((await inputsOf('busy-session')).length === 2 ? true : undefined), 10_000, 100);
    expect(await inputsOf('busy-session')).toEqual(['slow run', 'tick queued']);
  });

  it("a schedule's scope is each tick's session scope; a session stored under another scope is not sent to (Failed); a bad scope is refused", async () => {
    // The scope is checked where it enters: by the client, and by the object when called through the ingress.
    for (const scope of ['', 'user:\u001bada', 'x'.repeat(201)]) {
      await expect(schedules.schedule({ id: 'bad-scope', session: 's', input: 'x', every: 60_000, scope })).rejects.toSatisfy((error: unknown) => InvalidScheduleError.isInstance(error));
    }
    const refused = await scheduleObject.call('bad-scope', 'create', { session: 's', input: 'x', every: 60_000, scope: 'user:a\ud800' });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body)).toMatch(/scope: must not contain a lone surrogate/);
    expect(await schedules.get('bad-scope')).toBeUndefined();

    // Bob's session exists, under his scope.
    expect(await sessions.ok<{ scope: string | null }>('bob-digest', 'send', { message: 'hello', scope: 'user:bob' })).toMatchObject({ scope: 'user:bob' });
    const made = await schedules.schedule({ id: 'ada-nightly', session: 'ada-digest', input: 'digest for ada', at: Date.now() + 200, scope: 'user:ada' });
    expect(made.scope).toBe('user:ada');
    await schedules.schedule({ id: 'on-bobs', session: 'bob-digest', input: 'digest for ada', at: Date.now() + 200, scope: 'user:ada' });
    // A session made without a scope stays without one: not this schedule's either.
    await sessions.ok('no-scope-digest', 'send', { message: 'hello' });
    await schedules.schedule({ id: 'on-unscoped', session: 'no-scope-digest', input: 'digest for ada', at: Date.now() + 200, scope: 'user:ada' });
    const ticked = (id: string) => waitFor(`the tick of ${id}`, async () => ((await schedules.get(id))?.lastOutcome ? schedules.get(id) : undefined), 10_000, 100);
    expect(await ticked('ada-nightly')).toMatchObject({ lastOutcome: 'Sent', runs: 1 });
    await waitFor('the run', async () => ((await sessions.ok<{ turnsTaken: number }>('ada-digest', 'state')).turnsTaken === 3 ? true : undefined), 10_000, 100);
    // The run was Ada's: the session holds her scope, and every tool call was told it.
    expect(await sessions.ok<{ scope: string | null }>('ada-digest', 'state')).toMatchObject({ scope: 'user:ada' });
    const lines = existsSync(toolLog) ? readFileSync(toolLog, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { key: string; scope?: string }).filter((line) => line.key.startsWith('ada-digest:')) : [];
    expect(lines).toHaveLength(3);
    expect(lines.map((line) => line.scope)).toEqual(['user:ada', 'user:ada', 'user:ada']);
    // Bob's session got nothing: the tick failed, naming no scope.
    expect(await ticked('on-bobs')).toMatchObject({ lastOutcome: 'Failed', lastError: "the session could not be opened: session 'bob-digest' belongs to another scope", runs: 0, nextAt: null });
    expect(await inputsOf('bob-digest')).toEqual(['hello']);
    expect(await ticked('on-unscoped')).toMatchObject({ lastOutcome: 'Failed', lastError: "the session could not be opened: session 'no-scope-digest' belongs to another scope", runs: 0 });
    expect(await inputsOf('no-scope-digest')).toEqual(['hello']);
  });

  it("a stored row naming another surface's session (a subagent's, the MCP server's) is not fired there: Failed, saying why", async () => {
    // Made paused (no tick pending), then edited behind the object's back, as an older version could have stored it.
    const at = Date.now();
    const made = await schedules.schedule({ id: 'stored-child', session: 'placeholder', input: 'tick into the child', at, paused: true });
    expect(made.paused).toBe(true);
    const child = 'team/run-1:turn-1:call_1_0';
    const row = { ...(await scheduleObject.ok<Record<string, unknown>>('stored-child', 'get')), sessionId: child, paused: false };
    const response = await fetch(`${server.adminUrl}/services/loopchartSchedule/state`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ object_key: 'stored-child', new_state: { schedule: [...Buffer.from(JSON.stringify(row))] } }),
    });
    expect(response.status).toBeLessThan(300);
    await waitFor('the edited row', async () => ((await schedules.get('stored-child'))?.session === child ? true : undefined), 5_000, 100);
    expect(await scheduleObject.ok('stored-child', 'fire', { due: at })).toEqual({ fired: false });
    expect(await schedules.get('stored-child')).toMatchObject({ lastOutcome: 'Failed', lastError: expect.stringMatching(/^invalid schedule: session: it is a subagent's session/), runs: 0, nextAt: null });
    await sleep(300);
    expect(await sessions.ok<{ messageCount: number }>(child, 'state')).toMatchObject({ messageCount: 0 });
  });

  it("a tick finds the session's run waiting for an approval: Skipped with 'queue' too, saying what for, its input not queued behind the question", async () => {
    const run = await sessions.enqueue('deploy-session', 'send', { message: 'please deploy' });
    const waits = await waitFor('the run to wait', async () => (await sessions.ok<{ waits: string | null }>('deploy-session', 'state')).waits ?? undefined, 10_000, 100);
    expect(waits).toMatch(/the run waits for an approval of call\(s\) t2/);
    await schedules.schedule({ id: 'queued-on-wait', session: 'deploy-session', input: 'tick while waiting', at: Date.now() + 100, overlap: 'queue' });
    const info = await waitFor('the tick', async () => ((await schedules.get('queued-on-wait'))?.lastOutcome ? schedules.get('queued-on-wait') : undefined), 10_000, 100);
    expect(info).toMatchObject({ lastOutcome: 'Skipped', lastError: waits, runs: 0, nextAt: null });
    await sessions.ok('deploy-session', 'deny', { toolCallId: 't2', reason: 'not now' });
    await sessions.attach(run);
    await sleep(500);
    expect(await inputsOf('deploy-session')).toEqual(['please deploy']);
    expect((await sessions.ok<{ running: boolean }>('deploy-session', 'state')).running).toBe(false);
  });

  it("a session object of an earlier version (its state has no 'waits') still gets the tick: Sent, the row still read", async () => {
    const legacy = restateScheduleClient(server.ingressUrl, { name: 'legacySchedule' });
    await legacy.schedule({ id: 'legacy-tick', session: 'old-session', input: 'tick for an old worker', at: Date.now() + 100, overlap: 'queue' });
    const info = await waitFor('the tick', async () => ((await legacy.get('legacy-tick'))?.lastOutcome ? legacy.get('legacy-tick') : undefined), 10_000, 100);
    expect(info).toMatchObject({ lastOutcome: 'Sent', lastError: null, runs: 1 });
    const sent = await waitFor('the send', async () => {
      const got = await new IngressClient(server.ingressUrl, 'legacySession').ok<unknown[]>('old-session', 'sent');
      return got.length > 0 ? got : undefined;
    }, 5_000, 100);
    expect(sent).toEqual([{ message: 'tick for an old worker' }]);
  });

  it('a stored row this version does not read stops only itself: the list gives the others and reports it; delete removes it', async () => {
    await schedules.schedule({ id: 'readable', session: 'r-session', input: 'x', every: 3_600_000 });
    await schedules.schedule({ id: 'garbled', session: 'g-session', input: 'x', every: 3_600_000, paused: true });
    // Edited behind the object's back (another version, a hand edit): no `timing`, an unknown key.
    const response = await fetch(`${server.adminUrl}/services/loopchartSchedule/state`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ object_key: 'garbled', new_state: { schedule: [...Buffer.from(JSON.stringify({ id: 'garbled', sessionId: 'g-session', junk: true }))] } }),
    });
    expect(response.status).toBeLessThan(300);
    const reported: Error[] = [];
    const reporting = restateScheduleClient(server.ingressUrl, { onUnreadable: (error) => reported.push(error) });
    const listed = await waitFor('the edited row to be reported', async () => {
      reported.length = 0;
      const all = await reporting.list();
      return reported.length > 0 ? all : undefined;
    }, 5_000, 100);
    expect(listed.map((s) => s.id)).toContain('readable');
    expect(listed.map((s) => s.id)).not.toContain('garbled');
    expect(reported).toHaveLength(1);
    expect(StoreError.isInstance(reported[0])).toBe(true);
    expect(reported[0]!.message).toMatch(/schedule 'garbled': the stored row is not one this version reads/);
    // Read by id it is the StoreError; deleted without being read.
    await expect(schedules.get('garbled')).rejects.toSatisfy((error: unknown) => StoreError.isInstance(error));
    await schedules.delete('garbled');
    expect(await schedules.get('garbled')).toBeUndefined();
    reported.length = 0;
    expect((await reporting.list()).map((s) => s.id)).toContain('readable');
    expect(reported).toEqual([]);
    await schedules.delete('readable');
  });

  it('a worker killed (SIGKILL) before the due time: the tick fires once after a new worker starts', async () => {
    const at = Date.now() + 1_500;
    await schedules.schedule({ id: 'crash', session: 'crash-session', input: 'tick after crash', at });
    await worker.kill('SIGKILL');
    await sleep(at - Date.now() + 500);
    worker = await startOurWorker();
    await waitFor('the tick', async () => ((await schedules.get('crash'))?.runs === 1 ? true : undefined), 15_000, 100);
    await waitFor('the run', async () => ((await sessions.ok<{ turnsTaken: number }>('crash-session', 'state')).turnsTaken === 3 ? true : undefined), 10_000, 100);
    await sleep(500);
    expect(await inputsOf('crash-session')).toEqual(['tick after crash']);
    expect(appendsOf('crash-session').map((line) => line.pid)).toEqual(Array.from({ length: 3 }, () => worker.child.pid));
    expect(await schedules.get('crash')).toMatchObject({ runs: 1, lastOutcome: 'Sent', nextAt: null });
  });

  it('the CLI (--restate) adds, lists, pauses, resumes and deletes them; the viewer given the client lists them', async () => {
    const cli = async (...argv: string[]) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await main([...argv, '--restate', server.ingressUrl], { out: (line) => out.push(line), err: (line) => err.push(line) });
      return { code, out: out.join('\n'), err: err.join('\n') };
    };
    const added = await cli('schedules', 'add', '--id', 'cli-made', '--session', 'cli-session', '--input', 'tick from the CLI', '--every', '3600000');
    expect(added).toMatchObject({ code: 0, err: '' });
    expect(added.out).toMatch(/^cli-made {2}active {2}loopchartSession -> cli-session {2}every 3600000 ms {2}next 20\d\d-/);
    expect((await cli('schedules', 'list')).out.split('\n')).toContainEqual(expect.stringMatching(/^cli-made {2}active /));
    expect((await cli('schedules', 'pause', 'cli-made')).out).toMatch(/^cli-made {2}paused/);
    expect((await schedules.get('cli-made'))!.paused).toBe(true);

    // The viewer lists what the client lists, under the client's label: a store of its own has none of them.
    const viewer = await startViewer({ store: new MemorySessionStore(), port: 0, schedules });
    try {
      const page = await fetch(new URL('/schedules', viewer.url));
      const body = await page.text();
      expect(page.status).toBe(200);
      expect(body).toContain(`<h1>Schedules in Restate at ${server.ingressUrl.replace(/\/$/, '')}</h1>`);
      expect(body).toMatch(/<td class="id">cli-made<\/td>\n<td>loopchartSession<\/td>\n<td class="id"><a href="\/s\/cli-session">cli-session<\/a><\/td>\n<td>every 3600 s<\/td>\n<td>paused<\/td>/);
    } finally {
      await viewer.close();
    }

    expect((await cli('schedules', 'resume', 'cli-made')).out).toMatch(/^cli-made {2}active/);
    expect((await cli('schedules', 'delete', 'cli-made')).out).toBe('deleted cli-made');
    expect((await cli('schedules', 'list')).out).not.toContain('cli-made');
    const gone = await cli('schedules', 'pause', 'cli-made');
    expect(gone.code).toBe(1);
    expect(gone.err).toMatch(/no schedule 'cli-made'/);
  });
});
