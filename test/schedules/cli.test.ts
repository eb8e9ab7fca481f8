/** `loopchart schedules …` in process, on a SQLite file (and a PostgreSQL schema when DATABASE_URL is set). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';

const dir = mkdtempSync(join(tmpdir(), 'loopchart-schedules-cli-'));
const store = join(dir, 'loopchart.db');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function cli(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, { out: (line) => out.push(line), err: (line) => err.push(line) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

describe('loopchart schedules', () => {
  it('add, list, pause, resume, delete', async () => {
    const added = await cli('schedules', 'add', '--store', store, '--id', 'nightly', '--session', 'reports', '--agent', 'reporter', '--input', 'Report.', '--cron', '0 2 * * *', '--timezone', 'Europe/Paris');
    expect(added.code).toBe(0);
    expect(added.out).toMatch(/^nightly {2}active {2}reporter -> reports {2}cron '0 2 \* \* \*' Europe\/Paris {2}next 20\d\d-/);
    expect((await cli('schedules', 'add', '--store', store, '--id', 'ping', '--session', 's', '--agent', 'a', '--input', 'Ping.', '--every', '60000')).code).toBe(0);
    const listed = await cli('schedules', 'list', '--store', store);
    expect(listed.out.split('\n').map((l) => l.split('  ')[0])).toEqual(['nightly', 'ping']);
    expect((await cli('schedules', 'pause', 'ping', '--store', store)).out).toMatch(/^ping {2}paused/);
    expect((await cli('schedules', 'resume', 'ping', '--store', store)).out).toMatch(/^ping {2}active/);
    expect((await cli('schedules', 'delete', 'ping', '--store', store)).out).toBe('deleted ping');
    expect((await cli('schedules', 'list', '--store', store)).out.split('\n')).toHaveLength(1);
  });

  it('--scope gives each tick\'s session its memory scope: listed with the schedule; a scope no session could have is refused', async () => {
    const added = await cli('schedules', 'add', '--store', store, '--id', 'digest', '--session', 'ada-digest', '--agent', 'digest', '--input', 'Digest.', '--every', '60000', '--scope', 'user:ada');
    expect(added).toMatchObject({ code: 0, err: '' });
    expect(added.out).toMatch(/^digest {2}active {2}digest -> ada-digest \(scope user:ada\) {2}every 60000 ms/);
    const bad = await cli('schedules', 'add', '--store', store, '--id', 'bad-scope', '--session', 's', '--agent', 'a', '--input', 'x', '--every', '60000', '--scope', 'user:\u0007ada');
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(/invalid schedule: scope: must not contain control characters/);
    expect((await cli('schedules', 'list', '--store', store)).out).not.toContain('bad-scope');
    expect((await cli('schedules', 'delete', 'digest', '--store', store)).out).toBe('deleted digest');
  });

  it('bad input: one line on stderr, exit 1 (or 2 for usage), nothing stored', async () => {
    const cron = await cli('schedules', 'add', '--store', store, '--session', 's', '--agent', 'a', '--input', 'x', '--cron', '61 * * * *');
    expect(cron).toMatchObject({ code: 1 });
    expect(cron.err).toMatch(/^loopchart: cron expression '61 \* \* \* \*': minute: 61 is outside 0-59$/);
    const zone = await cli('schedules', 'add', '--store', store, '--session', 's', '--agent', 'a', '--input', 'x', '--cron', '* * * * *', '--timezone', 'Mars/Olympus');
    expect(zone.err).toMatch(/unknown time zone 'Mars\/Olympus'/);
    expect((await cli('schedules', 'pause', 'nope', '--store', store)).err).toMatch(/no schedule 'nope'/);
    expect((await cli('schedules', 'frobnicate', '--store', store)).code).toBe(2);
    expect((await cli('schedules', 'list', '--store', join(dir, 'missing.db'))).err).toMatch(/no session store/);
    expect((await cli('schedules', 'list', '--store', store)).out.split('\n')).toHaveLength(1);
  });
});

describe('loopchart schedules --restate, without a server (the commands against a real one are in test/distributed/schedules.test.ts)', () => {
  it('--store beside it, a URL that is none, or --agent / --missed on add: one line, exit 2; an ingress that does not answer: exit 1 naming it', async () => {
    const both = await cli('schedules', 'list', '--restate', 'http://127.0.0.1:9', '--store', store);
    expect(both).toMatchObject({ code: 2 });
    expect(both.err).toMatch(/--restate and --store name two places/);
    const notUrl = await cli('schedules', 'list', '--restate', 'file:///etc/passwd');
    expect(notUrl).toMatchObject({ code: 2 });
    expect(notUrl.err).toMatch(/--restate takes the ingress URL/);
    const agent = await cli('schedules', 'add', '--restate', 'http://127.0.0.1:9', '--session', 's', '--agent', 'a', '--input', 'x', '--every', '60000');
    expect(agent).toMatchObject({ code: 2 });
    expect(agent.err).toMatch(/takes no --agent/);
    // Port 9 (discard) has nothing listening on this machine: the connection is refused at once.
    const down = await cli('schedules', 'list', '--restate', 'http://127.0.0.1:9');
    expect(down).toMatchObject({ code: 1 });
    expect(down.err).toMatch(/^loopchart: .*Restate at http:\/\/127\.0\.0\.1:9.*list/);
    // `view` takes it too (its /schedules lists Restate's); the sessions commands do not.
    const view = await cli('view', '--restate', 'not a url', '--store', store);
    expect(view).toMatchObject({ code: 2 });
    expect(view.err).toMatch(/--restate takes the ingress URL/);
    // Why, not what: before, the refusal repeated the URL, a credential in it included.
    const withKey = await cli('schedules', 'list', '--restate', 'http://admin:sk-SECRET-9@127.0.0.1:9');
    expect(withKey).toMatchObject({ code: 2 });
    expect(withKey.err).toMatch(/--restate takes the ingress URL \(http:\/\/host:port\): the ingress URL must not contain credentials/);
    expect(withKey.err).not.toContain('sk-SECRET-9');
    expect((await cli('sessions', 'list', '--restate', 'http://127.0.0.1:9', '--store', store)).code).toBe(2);
  });
});

describe('loopchart scheduler, bad usage (the running command is in scheduler-cli.process.test.ts)', () => {
  const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));
  const listeners = process.listenerCount('SIGTERM');

  it('without --agents, with a module that exports no `agents`, or options out of range: one line, exit 2 or 1', async () => {
    const none = await cli('scheduler', '--store', store);
    expect(none).toMatchObject({ code: 2 });
    expect(none.err).toMatch(/^loopchart: loopchart scheduler needs --agents MODULE/);
    const wrong = await cli('scheduler', '--agents', fixture('no-agents.ts'), '--store', store);
    expect(wrong).toMatchObject({ code: 1 });
    expect(wrong.err).toMatch(/no-agents\.ts must export `agents`: an object of agents by name/);
    const lease = await cli('scheduler', '--agents', fixture('scheduler-agents.ts'), '--store', store, '--lease-ms', '10');
    expect(lease).toMatchObject({ code: 1 });
    expect(lease.err).toMatch(/invalid scheduler options: leaseMs/);
    expect((await cli('scheduler', '--agents', fixture('scheduler-agents.ts'), '--grace-ms', 'soon')).err).toMatch(/--grace-ms must be a whole number, got 'soon'/);
    expect((await cli('scheduler', '--help')).out).toMatch(/^usage: loopchart scheduler --agents MODULE/);
    // The signal listeners of the failed starts are gone.
    expect(process.listenerCount('SIGTERM')).toBe(listeners);
  });
});

const url = process.env.DATABASE_URL;

describe.skipIf(!url)('loopchart schedules on PostgreSQL', () => {
  const schema = `lc_sched_cli_${process.pid}_${Date.now().toString(36)}`;
  afterAll(async () => {
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  });

  it('add and list keep to the --schema given', async () => {
    const added = await cli('schedules', 'add', '--store', url!, '--schema', schema, '--id', 'pg-nightly', '--session', 'reports', '--agent', 'reporter', '--input', 'Report.', '--cron', '0 2 * * *');
    expect(added).toMatchObject({ code: 0 });
    expect((await cli('schedules', 'list', '--store', url!, '--schema', schema)).out).toMatch(/^pg-nightly {2}active/);
    expect((await cli('schedules', 'delete', 'pg-nightly', '--store', url!, '--schema', schema)).out).toBe('deleted pg-nightly');
  });
});
