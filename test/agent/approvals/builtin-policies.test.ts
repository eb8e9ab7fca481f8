/**
 * The built-in tool policies (loopchart/policies): a call budget per tool, and a path rule for
 * file tools that judges the real location of a path (`..` and symlinks resolved) against the
 * allowed roots, on a real directory tree.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { ToolPolicyRequest } from '../../../src/agent/approvals/tool-policy.js';
import { InvalidConfigError } from '../../../src/errors.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { callBudget, pathRule } from '../../../src/policies.js';
import { readFileTool } from '../../../src/tools/builtin.js';
import { runToCompletion } from '../../support/driver.js';
import { ask, recordingModel, resultsById } from '../../support/hitl.js';

const request = (name: string, args: Record<string, unknown>, earlier: string[] = []): ToolPolicyRequest => ({
  call: { id: 'c', name, args },
  sessionId: 's',
  turn: 1,
  messages: [],
  earlierCalls: earlier.map((tool, i) => ({ call: { id: `e${i}`, name: tool, args: {} } })),
  signal: new AbortController().signal,
});

describe('callBudget', () => {
  it('allows a tool up to its limit per run, then denies with a reason; other tools are not limited', () => {
    const policy = callBudget({ read_file: 2 });
    expect(policy(request('read_file', {}, ['read_file']))).toEqual({ type: 'allow' });
    expect(policy(request('read_file', {}, ['read_file', 'list_dir', 'read_file']))).toEqual({ type: 'deny', reason: 'call budget for read_file spent: 2 per run' });
    expect(policy(request('list_dir', {}, ['list_dir', 'list_dir', 'list_dir']))).toEqual({ type: 'allow' });
    // Names come from the model: one that is an Object.prototype key is just an unlimited tool.
    expect(policy(request('constructor', {}, ['constructor', 'constructor']))).toEqual({ type: 'allow' });
  });

  it('through the agent: the third call of a batch is denied and the model reads why', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'budget-'));
    writeFileSync(path.join(root, 'a.txt'), 'A');
    const model = recordingModel(scriptedModel([{ toolCalls: [1, 2, 3].map(() => ask('read_file', { path: 'a.txt' })) }, { text: 'done' }]));
    const agent = createAgentMachine({ model: model.model, tools: [readFileTool({ root })], retry: false, toolPolicy: callBudget({ read_file: 2 }) });
    const output = await runToCompletion(createActor(agent, { input: { prompt: 'go', sessionId: 's' } }));
    expect(output.outcome.type).toBe('Completed');
    const results = resultsById(model.requests[1]!);
    expect([0, 1, 2].map((i) => results.get(`call_1_${i}`)?.content)).toEqual(['A', 'A', 'denied: call budget for read_file spent: 2 per run']);
    rmSync(root, { recursive: true, force: true });
  });

  it('refuses a limit that is not a whole number >= 0 at creation', () => {
    expect(() => callBudget({ read_file: -1 })).toThrow(InvalidConfigError);
    expect(() => callBudget({ read_file: 1.5 })).toThrow(InvalidConfigError);
    expect(() => callBudget('read_file' as never)).toThrow(InvalidConfigError);
  });
});

describe('pathRule', () => {
  const top = mkdtempSync(path.join(tmpdir(), 'path-rule-'));
  const docs = path.join(top, 'docs');
  const secret = path.join(top, 'secret');
  mkdirSync(path.join(docs, 'sub'), { recursive: true });
  mkdirSync(secret);
  writeFileSync(path.join(docs, 'a.md'), 'a');
  writeFileSync(path.join(secret, 'key'), 'k');
  symlinkSync(secret, path.join(docs, 'escape'));
  symlinkSync(path.join(secret, 'new.txt'), path.join(docs, 'dangling'));
  symlinkSync(path.join(docs, 'a.md'), path.join(top, 'inward'));
  afterAll(() => rmSync(top, { recursive: true, force: true }));
  const policy = pathRule({ roots: [docs], base: top });
  const verdict = (name: string, args: Record<string, unknown>) => policy(request(name, args));

  it('allows paths inside a root: relative to the base, absolute, not yet existing, and a link from outside that points in', async () => {
    expect(await verdict('read_file', { path: 'docs/a.md' })).toEqual({ type: 'allow' });
    expect(await verdict('write_file', { path: path.join(docs, 'sub', 'new.md'), content: 'x' })).toEqual({ type: 'allow' });
    expect(await verdict('read_file', { path: 'docs/sub/../a.md' })).toEqual({ type: 'allow' });
    expect(await verdict('read_file', { path: 'inward' })).toEqual({ type: 'allow' });
    expect(await verdict('list_dir', {})).toEqual({ type: 'allow' });
  });

  it('denies `..` out of the root, a symlink inside that points out, and a dangling link that would create a file outside', async () => {
    expect(await verdict('read_file', { path: 'docs/../secret/key' })).toEqual({ type: 'deny', reason: 'read_file: path "docs/../secret/key" is outside the allowed roots' });
    expect(await verdict('read_file', { path: 'docs/escape/key' })).toMatchObject({ type: 'deny' });
    expect(await verdict('write_file', { path: 'docs/dangling', content: 'x' })).toMatchObject({ type: 'deny' });
    expect(await verdict('read_file', { path: '/etc/passwd' })).toMatchObject({ type: 'deny' });
    expect(await verdict('read_file', { path: 42 })).toEqual({ type: 'deny', reason: 'argument path of read_file must be a path string' });
  });

  it('judges only the tools and arguments it is given; other tools pass', async () => {
    const custom = pathRule({ roots: [docs], tools: { copy: ['from', 'to'] } });
    expect(await custom(request('copy', { from: path.join(docs, 'a.md'), to: path.join(secret, 'b') }))).toMatchObject({ type: 'deny' });
    expect(await custom(request('copy', { from: path.join(docs, 'a.md'), to: path.join(docs, 'b') }))).toEqual({ type: 'allow' });
    expect(await custom(request('read_file', { path: '/etc/passwd' }))).toEqual({ type: 'allow' });
  });

  it('refuses options without roots at creation', () => {
    expect(() => pathRule({ roots: [] })).toThrow(InvalidConfigError);
    expect(() => pathRule({ root: '.' } as never)).toThrow(InvalidConfigError);
  });
});
