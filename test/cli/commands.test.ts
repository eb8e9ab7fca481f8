/**
 * The CLI's words, in process: an unknown command names the closest one (or the commands there
 * are) in one line with exit code 2, instead of the whole help; every command line it suggests
 * is written one way, `npx loopchart …`, as the demo writes them.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadAgentMachine } from '../../src/cli/agent.js';
import { sendHint } from '../../src/cli/continue.js';
import { main } from '../../src/cli/main.js';
import { parseLocation } from '../../src/cli/store.js';
import { closestCommand } from '../../src/cli/suggest.js';
import { userMarkdown } from '../docs/markdown.js';
import { REPO } from '../sessions/fixtures/processes.js';

async function cli(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, { out: (line) => out.push(line), err: (line) => err.push(line) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

describe('an unknown command', () => {
  it.each([
    [['sessions', 'lst'], "loopchart: unknown command 'sessions lst'; did you mean 'sessions list'? (npx loopchart sessions --help for more)"],
    [['sessions', 'sned', 'x', 'hi'], "loopchart: unknown command 'sessions sned'; did you mean 'sessions send'? (npx loopchart sessions --help for more)"],
    [['sesions', 'list'], "loopchart: unknown command 'sesions'; did you mean 'sessions'? (npx loopchart --help for more)"],
    [['view', 'exprot'], "loopchart: unknown command 'view exprot'; did you mean 'view export'? (npx loopchart view --help for more)"],
  ])('%j suggests the closest command in one line, exit 2, no help text', async (argv, line) => {
    const { code, out, err } = await cli(...argv);
    expect(code).toBe(2);
    expect(out).toBe('');
    expect(err).toBe(line);
  });

  it('with nothing close, lists the commands of its group in the same one line', async () => {
    const { code, err } = await cli('sessions', 'frobnicate');
    expect(code).toBe(2);
    expect(err).toBe(
      "loopchart: unknown command 'sessions frobnicate'; the commands: list, show, resume, send, rewind, doubt, replay, fork (npx loopchart sessions --help for more)",
    );
  });

  it('bad arguments to a known command still print its usage (exit 2)', async () => {
    const { code, err } = await cli('sessions', 'show');
    expect(code).toBe(2);
    expect(err.split('\n')[0]).toBe('loopchart: usage: loopchart sessions show ID');
    expect(err).toContain('sessions commands:');
  });

  it('closestCommand: one edit up to five letters, two beyond, a swap counts as one, a tie or a far word is no guess', () => {
    expect(closestCommand('lsit', ['list', 'show'])).toBe('list');
    expect(closestCommand('rewnd', ['resume', 'rewind'])).toBe('rewind');
    expect(closestCommand('reume', ['resume', 'rewind'])).toBe('resume');
    expect(closestCommand('shw', ['show', 'send'])).toBe('show');
    expect(closestCommand('sxnd', ['send', 'sand'])).toBeUndefined();
    expect(closestCommand('zzzz', ['list', 'show'])).toBeUndefined();
    expect(closestCommand('LIST', ['list'])).toBe('list');
  });
});

describe('an unknown option', () => {
  it.each([
    [['eval', 'evals/dataset', '--agent', 'a.ts', '--model', 'recorded'], "loopchart: unknown option '--model'", 'usage: loopchart eval DATASET'],
    [['eval', 'evals/dataset', '--agent', 'a.ts', '--dryrun'], "loopchart: unknown option '--dryrun'; did you mean '--dry-run'?", 'usage: loopchart eval DATASET'],
    [['schedules', 'add', '--sesion', 's'], "loopchart: unknown option '--sesion'; did you mean '--session'?", 'usage: loopchart schedules'],
    [['scheduler', '--agent', 'a.ts'], "loopchart: unknown option '--agent'; did you mean '--agents'?", 'usage: loopchart scheduler'],
    [['memory', 'delete', 'user:1', '--force'], "loopchart: unknown option '--force'", 'usage: loopchart memory'],
    [['chart', '--svgs', 'brain'], "loopchart: unknown option '--svgs'; did you mean '--svg'?", 'usage: loopchart chart'],
    [['sessions', 'list', '--ful'], "loopchart: unknown option '--ful'; did you mean '--full'?", 'usage: loopchart sessions'],
  ])('%j: one line naming it (the closest option when one is close), then the usage of its own command, exit 2', async (argv, line, usage) => {
    const { code, out, err } = await cli(...argv);
    expect(code).toBe(2);
    expect(out).toBe('');
    const [first, ...rest] = err.split('\n');
    expect(first).toBe(line);
    expect(rest.join('\n').startsWith(usage), rest[0]).toBe(true);
  });
});

describe('hints are written one way: npx loopchart …', () => {
  const options = { location: parseLocation(undefined), full: false, io: { out() {}, err() {} } };

  it('the send hint, and the refusal to resume a session without its agent', async () => {
    expect(sendHint('s1', options)).toBe('npx loopchart sessions send s1 "your next message"');
    await expect(loadAgentMachine(undefined, 'ticket-1')).rejects.toThrow(
      'Name the agent that made it: npx loopchart sessions resume ticket-1 --agent ./agent.ts (a module',
    );
  });

  it('no source file of the CLI or the demo writes a `loopchart sessions …` or `view export` hint without npx', () => {
    const files = [...readdirSync(join(REPO, 'src/cli')).map((file) => join(REPO, 'src/cli', file)), join(REPO, 'examples/demo.ts')];
    const bare: string[] = [];
    for (const file of files) {
      readFileSync(file, 'utf8')
        .split('\n')
        .forEach((line, i) => {
          // Code lines only (comments describe commands), and not a usage synopsis (`usage: loopchart …`, the help's lines).
          if (/^\s*(\/\/|\*|\/\*\*)/.test(line) || /usage: loopchart|^\s+loopchart (sessions|view|eval) /.test(line)) return;
          if (/(?<!npx |usage: |\w)loopchart (sessions (list|show|resume|send|rewind|doubt|replay|fork)|view export)\b/.test(line) && /[`'"]/.test(line)) bare.push(`${file.slice(REPO.length)}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(bare).toEqual([]);
  });

  it('no command in a code block of the README or a guide is a bare `loopchart …`: in a project the package is not on PATH', () => {
    const bare: string[] = [];
    for (const page of userMarkdown()) {
      let fenced = false;
      page.text.split('\n').forEach((line, i) => {
        if (line.trimStart().startsWith('```')) fenced = !fenced;
        else if (fenced && /^\s*(\$ )?loopchart (sessions|view|eval|schedules|scheduler|memory|chart)\b/.test(line)) bare.push(`${page.path}:${i + 1}: ${line.trim()}`);
      });
    }
    expect(bare).toEqual([]);
  });
});
