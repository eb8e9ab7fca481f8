/**
 * The CLI behaves like a Unix tool (issue 24): a closed pipe ends it quietly with status 0 (in a
 * real shell pipeline), `loopchart sessions` and each group print their help, every line it prints
 * is escaped one way (the `--store` label and the invisible U+2028, U+2029, U+200B, U+FEFF
 * included), and a missing optional package (pg, better-sqlite3) is one line naming what to
 * install and agreeing with the README (children whose module resolution lacks the package).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { main } from '../../src/cli/main.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { bundledCommand, type NodeCommand } from './fixtures/processes.js';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(REPO, 'bin', 'loopchart.js');
const HIDE = pathToFileURL(fileURLToPath(new URL('./fixtures/hide-packages.mjs', import.meta.url))).href;
const CLI = join(REPO, 'src', 'cli.ts');

const dir = mkdtempSync(join(tmpdir(), 'loopchart-cli-unix-'));
const db = join(dir, 'sessions.db');
/** src/cli.ts as a bundle, for the children that hide a package (see bundledCommand). */
let cliBundle: NodeCommand;
beforeAll(async () => {
  cliBundle = await bundledCommand(CLI);
});
afterAll(() => {
  cliBundle?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

const INVISIBLE = '\u2028\u2029\u200b\ufeff';

beforeAll(async () => {
  const store = new SqliteSessionStore({ path: db });
  const machine = createAgentMachine({ model: scriptedModel([{ text: `odd${INVISIBLE}reply` }]) });
  for (const sessionId of ['one', 'two', 'three']) {
    const session = await DurableSession.open({ machine, store, sessionId });
    session.send({ type: 'input', message: 'hello' });
    await session.whenIdle();
    await session.close();
  }
  // A transcript far larger than a pipe's buffer (64 KiB): the writer is still writing when `head` leaves.
  await (await DurableSession.open({ machine, store, sessionId: 'big', history: [{ role: 'system', content: 'x'.repeat(400_000) }] })).close();
  await store.close();
});

/** `loopchart <args> | <reader>` in bash: what the reader printed, what loopchart wrote to stderr, loopchart's own status. */
function pipeline(args: string, reader: string): Promise<{ stdout: string; stderr: string; status: number }> {
  const errFile = join(dir, `stderr-${Math.random().toString(36).slice(2)}`);
  const script = `"$NODE" "$BIN" ${args} 2>"$ERR_FILE" | ${reader}; echo "status=\${PIPESTATUS[0]}"`;
  return new Promise((resolve, reject) => {
    const env = { ...process.env, NODE: process.execPath, BIN, ERR_FILE: errFile };
    const child = spawn('bash', ['-c', script], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    const timer = setTimeout(() => (child.kill('SIGKILL'), reject(new Error(`bash did not finish: ${stdout}`))), 30_000);
    child.on('close', () => {
      clearTimeout(timer);
      const status = Number(/status=(\d+)\s*$/.exec(stdout)?.[1] ?? NaN);
      resolve({ stdout: stdout.replace(/status=\d+\s*$/, ''), stderr: readFileSync(errFile, 'utf8'), status });
    });
  });
}

describe('a closed pipe (EPIPE) in a real shell pipeline', () => {
  it.each([
    ['sessions list | head -1', `sessions list --store "${db}"`, 'head -1', /^SESSION +VERSION/],
    ['sessions list | head -n 0 (the reader is gone before the first write)', `sessions list --store "${db}"`, 'head -n 0', /^$/],
    ['sessions show --full of a 400 kB transcript | head -1', `sessions show big --full --store "${db}"`, 'head -1', /^session big · version/],
  ])('%s: status 0, nothing on stderr', async (_name, args, reader, first) => {
    const run = await pipeline(args, reader);
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(first);
  });
});

/** The real `main` in this process, on the real SQLite file: what it prints and returns. */
async function cli(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, { out: (line) => out.push(line), err: (line) => err.push(line) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

describe('help', () => {
  it('`loopchart sessions` lists its commands (exit 0), as `loopchart sessions --help` does', async () => {
    for (const argv of [['sessions'], ['sessions', '--help'], ['sessions', 'list', '-h']]) {
      const { code, out, err } = await cli(...argv);
      expect(code, argv.join(' ')).toBe(0);
      expect(err).toBe('');
      expect(out).toMatch(/^usage: loopchart sessions <command> \[options\]/);
      for (const command of ['list', 'show ID', 'resume ID', 'send ID TEXT', 'rewind ID N', 'replay ID', 'fork ID --at N']) expect(out).toContain(`  ${command}`);
      expect(out).not.toContain('usage: loopchart view');
    }
  });

  it('`loopchart view --help` prints the view group, `loopchart` alone everything', async () => {
    const view = await cli('view', '--help');
    expect(view.code).toBe(0);
    expect(view.out).toMatch(/^usage: loopchart view \[--store LOCATION\] \[--port N\] \[--restate URL\]\n {7}loopchart view export ID -o FILE/);
    expect(view.out).not.toContain('send ID TEXT');
    const all = await cli();
    expect(all.code).toBe(0);
    expect(all.out).toContain('send ID TEXT');
    expect(all.out).toContain('view export ID -o FILE');
  });

  it('an unknown group is a usage error (exit 2): one line with the closest group, not the whole usage', async () => {
    const { code, err } = await cli('session', 'list');
    expect(code).toBe(2);
    expect(err.trim()).toBe("loopchart: unknown command 'session'; did you mean 'sessions'? (npx loopchart --help for more)");
  });
});

describe('one escape for everything printed', () => {
  const raw = /[\u2028\u2029\u200b\ufeff\u001b]/;

  it('stored text: a reply with U+2028, U+2029, U+200B and U+FEFF is shown as \\u escapes', async () => {
    const { code, out } = await cli('sessions', 'show', 'one', '--store', db);
    expect(code).toBe(0);
    expect(out).toContain('odd\\u2028\\u2029\\u200b\\ufeffreply');
    expect(out).not.toMatch(raw);
  });

  it('the --store label, in output and in errors, is escaped like stored text', async () => {
    const hostile = join(dir, `no\u2028such\u200b\ufeff\u001b[31m.db`);
    const shown = join(dir, 'no\\u2028such\\u200b\\ufeff\\x1b[31m.db');
    const list = await cli('sessions', 'list', '--store', hostile);
    expect(list.out).toBe(`no sessions: ${shown} does not exist`);
    const show = await cli('sessions', 'show', 'one', '--store', hostile);
    expect(show.code).toBe(1);
    expect(show.err).toBe(`loopchart: no session store at ${shown}`);
    const memory = await cli('sessions', 'show', `gh\u2029ost`, '--store', 'memory:');
    expect(memory.err).toBe("loopchart: no session 'gh\\u2029ost' in memory:");
    for (const run of [list, show, memory]) expect(run.out + run.err).not.toMatch(raw);
  });
});

/** The CLI in a child whose module resolution lacks `packages`, as a project without them installed. */
function withoutPackages(packages: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', HIDE, ...cliBundle.args, ...args], {
      env: { ...process.env, LOOPCHART_HIDE_PACKAGES: packages },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => (child.kill('SIGKILL'), reject(new Error('the CLI did not exit'))), 30_000);
    child.on('close', (code) => (clearTimeout(timer), resolve({ code, stdout, stderr })));
  });
}

const README = readFileSync(join(REPO, 'README.md'), 'utf8');

describe('a missing optional package is one line naming what to install', () => {
  it('a postgres:// store without pg: one line, npm install pg, exit 1', async () => {
    const run = await withoutPackages('pg', ['sessions', 'list', '--store', 'postgres://user:secret@127.0.0.1:1/app']);
    expect(run.code).toBe(1);
    expect(run.stderr).toBe("loopchart: a postgres:// store needs the package 'pg', which is not installed: npm install pg\n");
    expect(README).toMatch(/`loopchart\/postgres` \| `PostgresSessionStore` \| `pg`/);
  });

  // On Node 22.13+ the store runs on node:sqlite and never asks for better-sqlite3.
  const hasNodeSqlite = (() => {
    try {
      return process.getBuiltinModule?.('node:sqlite') !== undefined;
    } catch {
      return false;
    }
  })();
  it.skipIf(hasNodeSqlite)('a SQLite store on a Node without node:sqlite or better-sqlite3: the Node version the README names', async () => {
    const version = /Node (\d+\.\d+)\+ \(built-in `node:sqlite`\)/.exec(README)?.[1];
    expect(version).toBe('22.13');
    const file = join(dir, 'empty.db');
    writeFileSync(file, '');
    const run = await withoutPackages('better-sqlite3', ['sessions', 'list', '--store', file]);
    expect(run.code).toBe(1);
    expect(run.stderr.trimEnd().split('\n')).toEqual([expect.stringContaining(`Run Node ${version} or later to use the built-in node:sqlite, or install it: npm install better-sqlite3`)]);
  });
});
