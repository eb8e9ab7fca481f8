/**
 * Replay of a run that made a structured-output final call: an agent with an output schema whose
 * run was about to end by maxTurns or a budget (also the time budget passing during a tool batch)
 * asked the model once more for its answer; a steer sent during a model call (the final one
 * too); a run a seal, a cancel or the time budget ended during a tool batch. Each session is made on a real SQLite file and replayed from it: the unchanged recording
 * replays with no divergence, a changed one still diverges.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { replayAgainst } from '../../src/evals/helpers.js';
import type { Model, ModelRequest } from '../../src/model.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { replaySession } from '../../src/sessions/replay.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { defineTool } from '../../src/tools/define-tool.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-replay-final-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const City = z.object({ city: z.string(), population: z.number().int() });
const lookup = defineTool({ name: 'lookup', description: 'Looks up.', input: z.object({}), execute: () => 'nothing yet' });
const asksForAnswer = (request: ModelRequest) => String(request.messages.at(-1)?.content).startsWith('This run has reached');

/** A model that calls `lookup` until it is asked for the answer, then gives `final` (a reply, or one built from the request). */
const looping = (final: object) => scriptedModel(Array.from({ length: 8 }, () => (request: ModelRequest) => (asksForAnswer(request) ? final : { toolCalls: [{ name: 'lookup', args: {} }] })));
const answer = (args: unknown) => ({ toolCalls: [{ name: 'final_answer', args }] });

/** Bounds a run in time: a session that never settles fails the test instead of hanging it. */
async function within<T>(promise: Promise<T>, ms = 10_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`still running after ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs each message (one run each) in a session on its own SQLite file, reopened per run as another process would. */
async function record(name: string, machine: ReturnType<typeof createAgentMachine>, messages: readonly string[], during?: (session: DurableSession) => void) {
  const path = join(root, `${name}.db`);
  const outputs = [];
  for (const message of messages) {
    const store = new SqliteSessionStore({ path });
    const session = await DurableSession.open({ machine, store, sessionId: name });
    session.send({ type: 'input', message });
    during?.(session);
    outputs.push(await within(session.whenIdle()));
    await session.close();
    await store.close();
  }
  return { path, outputs };
}

async function replayFile(path: string, sessionId: string) {
  const store = new SqliteSessionStore({ path });
  try {
    return { report: await replaySession(store, sessionId), stored: (await store.load(sessionId))! };
  } finally {
    await store.close();
  }
}

/** A copy of a session file whose first trace entry `where` matches is rewritten by `edit`. */
function tampered(from: string, name: string, where: (entry: Record<string, unknown>) => boolean, edit: (entry: Record<string, unknown>) => void): string {
  const path = join(root, `${name}.db`);
  const source = new Database(from);
  source.exec(`VACUUM INTO '${path}'`);
  source.close();
  const db = new Database(path);
  const rows = db.prepare('SELECT seq, entry FROM trace ORDER BY seq').all() as Array<{ seq: number; entry: string }>;
  const row = rows.find((r) => where(JSON.parse(r.entry)));
  if (!row) throw new Error('no such trace entry');
  const entry = JSON.parse(row.entry);
  edit(entry);
  db.prepare('UPDATE trace SET entry = ? WHERE seq = ?').run(JSON.stringify(entry), row.seq);
  db.close();
  return path;
}

/** A model with a JSON-schema mode: it answers in text, a tool call until it is asked for the answer. */
const jsonModel = (answerText: string): Model => ({
  name: 'json-mode',
  supports: { responseFormat: 1 },
  async generate(request) {
    if (asksForAnswer(request)) return { message: { role: 'assistant', content: answerText }, finishReason: 'stop' };
    return { message: { role: 'assistant', content: '', toolCalls: [{ id: `c${request.messages.length}`, name: 'lookup', args: {} }] }, finishReason: 'tool-calls' };
  },
});

describe('replay of a final call at the turn limit', () => {
  it('a valid answer through final_answer: no divergence, the final call a decision of its own', async () => {
    const machine = createAgentMachine({ model: looping(answer({ city: 'Lyon', population: 3 })), tools: [lookup], output: City, policy: { maxTurns: 2 } });
    const { path, outputs } = await record('turns-valid', machine, ['A city?']);
    expect(outputs[0]?.outcome).toMatchObject({ type: 'Completed', output: { city: 'Lyon', population: 3 } });
    const { report } = await replayFile(path, 'turns-valid');
    expect(report.divergence).toBeNull();
    expect(report.decisions).toEqual(['CallLLM turn 1', expect.stringMatching(/^CallTools turn 1/), 'CallLLM turn 2', expect.stringMatching(/^CallTools turn 2/), 'CallLLM turn 3', 'Done Completed']);
  }, 30_000);

  it('an answer the schema refuses ends the run MaxTurnsExceeded: no divergence', async () => {
    const machine = createAgentMachine({ model: looping(answer({ city: 'Lyon' })), tools: [lookup], output: City, policy: { maxTurns: 1 } });
    const { path, outputs } = await record('turns-refused', machine, ['A city?']);
    expect(outputs[0]?.outcome).toEqual({ type: 'MaxTurnsExceeded' });
    const { report, stored } = await replayFile(path, 'turns-refused');
    expect(stored.messages.at(-1)).toEqual({ role: 'assistant', content: '{"city":"Lyon"}' });
    expect(report.divergence).toBeNull();
    expect(report.decisions.at(-1)).toBe('Done MaxTurnsExceeded');
  }, 30_000);

  it('final_answer beside another tool call (the other never runs), and the JSON-schema mode: no divergence', async () => {
    const mixed = { toolCalls: [{ name: 'lookup', args: {} }, { name: 'final_answer', args: { city: 'Lyon', population: 3 } }] };
    const { path } = await record('turns-mixed', createAgentMachine({ model: looping(mixed), tools: [lookup], output: City, policy: { maxTurns: 1 } }), ['A city?']);
    expect((await replayFile(path, 'turns-mixed')).report.divergence).toBeNull();
    const json = await record('turns-json', createAgentMachine({ model: jsonModel('{"city":"Lyon","population":3}'), tools: [lookup], output: City, policy: { maxTurns: 1 } }), ['A city?']);
    expect(json.outputs[0]?.outcome).toMatchObject({ type: 'Completed', output: { city: 'Lyon', population: 3 } });
    expect((await replayFile(json.path, 'turns-json')).report.divergence).toBeNull();
  }, 30_000);

  it("a second run in a reopened process (its first prompt holds the first run's request and answer): no divergence", async () => {
    const machine = createAgentMachine({ model: looping(answer({ city: 'Lyon', population: 3 })), tools: [lookup], output: City, policy: { maxTurns: 1 } });
    const { path, outputs } = await record('two-runs', machine, ['A city?', 'Another city?']);
    expect(outputs.map((output) => output?.outcome.type)).toEqual(['Completed', 'Completed']);
    const { report } = await replayFile(path, 'two-runs');
    expect(report.divergence).toBeNull();
    expect(report.runs).toBe(2);
  }, 30_000);
});

describe('replay of a final call at a budget', () => {
  it('a budget passed between two steps: the valid answer, and a model that still calls tools (Sealed), replay with no divergence', async () => {
    const valid = await record('budget-valid', createAgentMachine({ model: looping(answer({ city: 'Lyon', population: 3 })), tools: [lookup], output: City, budget: { maxToolCalls: 1 } }), ['A city?']);
    expect(valid.outputs[0]?.outcome).toMatchObject({ type: 'Completed', output: { city: 'Lyon', population: 3 } });
    expect((await replayFile(valid.path, 'budget-valid')).report.divergence).toBeNull();
    const stubborn = await record('budget-sealed', createAgentMachine({ model: looping({ toolCalls: [{ name: 'lookup', args: {} }] }), tools: [lookup], output: City, budget: { maxToolCalls: 1 } }), ['A city?']);
    expect(stubborn.outputs[0]?.outcome).toEqual({ type: 'Sealed', reason: 'budget: 2 tool calls made, limit 1' });
    const { report } = await replayFile(stubborn.path, 'budget-sealed');
    expect(report.divergence).toBeNull();
    expect(report.decisions.at(-1)).toBe('Done Sealed');
  }, 30_000);

  it('the time budget passing during a tool batch: the batch cut (interrupted), then the final call; no divergence', async () => {
    const slow = defineTool({
      name: 'slow',
      description: 'Takes its time.',
      input: z.object({}),
      execute: (_args, { signal }) => new Promise((resolve) => signal.addEventListener('abort', () => resolve('stopped'), { once: true })),
    });
    const model = scriptedModel(Array.from({ length: 4 }, () => (request: ModelRequest) => (asksForAnswer(request) ? answer({ city: 'Lyon', population: 3 }) : { toolCalls: [{ name: 'slow', args: {} }] })));
    const { path, outputs } = await record('deadline', createAgentMachine({ model, tools: [slow], output: City, budget: { maxDurationMs: 300 } }), ['A city?']);
    expect(outputs[0]?.outcome).toMatchObject({ type: 'Completed', output: { city: 'Lyon', population: 3 } });
    const { report, stored } = await replayFile(path, 'deadline');
    expect(stored.messages.find((m) => m.role === 'tool')?.content).toMatch(/interrupted/);
    expect(report.divergence).toBeNull();
    expect(report.decisions).toEqual(['CallLLM turn 1', expect.stringMatching(/^CallTools turn 1/), 'CallLLM turn 2', 'Done Completed']);
  }, 30_000);
});

describe('replay of a steer sent while a model call was in flight', () => {
  /** Sends `message` as a steer once `gate` opens (the model call it waits in has begun). */
  const steerWhen = (gate: Promise<void>, message: string) => (session: DurableSession) => void gate.then(() => session.send({ type: 'steer', message }));

  it('after a tool batch: the steer joins the conversation after the reply, as the driver delivered it; no divergence', async () => {
    let asked!: () => void;
    const secondCall = new Promise<void>((resolve) => (asked = resolve));
    const model = scriptedModel([
      { toolCalls: [{ name: 'lookup', args: {} }] },
      async () => (asked(), await new Promise((resolve) => setTimeout(resolve, 50)), { text: 'Nothing found.' }),
      { text: 'Still nothing.' },
    ]);
    const { path, outputs } = await record('steer-after-batch', createAgentMachine({ model, tools: [lookup] }), ['A city?'], steerWhen(secondCall, 'Try harder.'));
    expect(outputs[0]?.outcome).toEqual({ type: 'Completed', finalText: 'Still nothing.' });
    const { report, stored } = await replayFile(path, 'steer-after-batch');
    expect(stored.messages.map((m) => m.content).slice(-3)).toEqual(['Nothing found.', 'Try harder.', 'Still nothing.']);
    expect(report.divergence).toBeNull();
    expect(report.decisions).toEqual(['CallLLM turn 1', expect.stringMatching(/^CallTools turn 1/), 'CallLLM turn 2', 'CallLLM turn 3', 'Done Completed']);
  }, 30_000);

  it('a steer that arrived during the final call (the valid answer still completes the run): no divergence', async () => {
    let asked!: () => void;
    const finalAsked = new Promise<void>((resolve) => (asked = resolve));
    const model = scriptedModel(
      Array.from({ length: 5 }, () => async (request: ModelRequest) => {
        if (!asksForAnswer(request)) return { toolCalls: [{ name: 'lookup', args: {} }] };
        asked();
        await new Promise((resolve) => setTimeout(resolve, 50));
        return answer({ city: 'Lyon', population: 3 });
      }),
    );
    const machine = createAgentMachine({ model, tools: [lookup], output: City, policy: { maxTurns: 1 } });
    const { path, outputs } = await record('turns-steered', machine, ['A city?'], steerWhen(finalAsked, 'and its river'));
    expect(outputs[0]?.outcome).toMatchObject({ type: 'Completed', output: { city: 'Lyon', population: 3 } });
    const { report, stored } = await replayFile(path, 'turns-steered');
    expect(stored.messages.at(-1)).toEqual({ role: 'user', content: 'and its river' });
    expect(report.divergence).toBeNull();
  }, 30_000);
});

describe('replay of a run ended during a tool batch (its aborted call records its result after the end)', () => {
  /** A tool that runs until it is aborted, opening `started` as it begins. */
  const hanging = () => {
    let begin!: () => void;
    const started = new Promise<void>((resolve) => (begin = resolve));
    const tool = defineTool({
      name: 'slow',
      description: 'Takes its time.',
      input: z.object({}),
      execute: (_args, { signal }) => (begin(), new Promise((resolve) => signal.addEventListener('abort', () => resolve('stopped'), { once: true }))),
    });
    return { tool, started };
  };
  const batch = (...names: string[]) => scriptedModel([{ toolCalls: names.map((name) => ({ name, args: {} })) }]);

  it.each([
    ['a seal', { type: 'seal', reason: 'enough' } as const, { type: 'Sealed', reason: 'enough' }],
    ['a cancel', { type: 'cancel' } as const, { type: 'Cancelled' }],
  ])('%s from the host: no divergence, the aborted call answered interrupted and not counted', async (name, end, outcome) => {
    const { tool, started } = hanging();
    const sessionId = `ended-by-${end.type}`;
    const { path, outputs } = await record(sessionId, createAgentMachine({ model: batch('slow'), tools: [tool] }), ['A city?'], (session) => void started.then(() => session.send(end)));
    expect(outputs[0]?.outcome).toEqual(outcome);
    const { report, stored } = await replayFile(path, sessionId);
    expect(stored.messages.filter((m) => m.role === 'tool').map((m) => m.content)).toEqual([expect.stringMatching(/^interrupted/)]);
    expect(report.divergence).toBeNull();
    expect(report.decisions.at(-1)).toBe(`Done ${outcome.type}`);
  }, 30_000);

  it('the time budget, without an output schema: no divergence', async () => {
    const { tool } = hanging();
    const { path, outputs } = await record('ended-by-deadline', createAgentMachine({ model: batch('lookup', 'slow'), tools: [lookup, tool], budget: { maxDurationMs: 300 } }), ['A city?']);
    expect(outputs[0]?.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringMatching(/^budget: \d+ ms elapsed, limit 300 ms$/) });
    const { report, stored } = await replayFile(path, 'ended-by-deadline');
    expect(stored.messages.filter((m) => m.role === 'tool').map((m) => m.content)).toEqual(['nothing yet', expect.stringMatching(/^interrupted/)]);
    expect(report.divergence).toBeNull();
  }, 30_000);
});

describe('a final call that no longer replays as recorded still diverges', () => {
  it('a different recorded answer: the stored log shows what the run was given', async () => {
    const machine = createAgentMachine({ model: looping(answer({ city: 'Lyon', population: 3 })), tools: [lookup], output: City, policy: { maxTurns: 1 } });
    const { path } = await record('changed-answer', machine, ['A city?']);
    const edited = tampered(path, 'changed-answer-edited', (e) => e.type === 'model' && e.turn === 2, (e) => {
      (e.reply as { message: { toolCalls: Array<{ args: unknown }> } }).message.toolCalls[0]!.args = { city: 'Paris', population: 3 };
    });
    const { report } = await replayFile(edited, 'changed-answer');
    // The replay fed the edited answer; the state stored at rest holds the one the run was given.
    expect(report.divergence).toMatchObject({ expected: expect.stringMatching(/^the stored state: .*Lyon/), got: expect.stringContaining('Paris') });
  }, 30_000);

  it('a request for the answer at the turn limit where the run had turns left diverges at that call', async () => {
    const machine = createAgentMachine({ model: looping(answer({ city: 'Lyon', population: 3 })), tools: [lookup], output: City, budget: { maxToolCalls: 1 } });
    const { path } = await record('changed-why', machine, ['A city?']);
    const edited = tampered(path, 'changed-why-edited', (e) => e.type === 'model' && (e.tools as string[]).length === 1, (e) => {
      const request = (e.promptDelta as Array<{ content: string }>).at(-1)!;
      request.content = request.content.replace(/its budget \(.*\)\./, 'the turn limit.');
    });
    const { report } = await replayFile(edited, 'changed-why');
    expect(report.divergence).toMatchObject({ expected: 'a final call (turn 3) asking for the answer at the turn limit', got: 'CallLLM turn 3' });
  }, 30_000);

  it('replayed against an agent with another output schema, the recorded answer no longer completes the run', async () => {
    const model = looping(answer({ city: 'Lyon', population: 3 }));
    const { path } = await record('changed-schema', createAgentMachine({ model, tools: [lookup], output: City, policy: { maxTurns: 1 } }), ['A city?']);
    const store = new SqliteSessionStore({ path });
    try {
      expect((await replayAgainst(store, 'changed-schema', { model, tools: [lookup], output: City, policy: { maxTurns: 1 } })).difference).toBeNull();
      const other = await replayAgainst(store, 'changed-schema', { model, tools: [lookup], output: z.object({ city: z.string(), river: z.string() }), policy: { maxTurns: 1 } });
      expect(other.outcome).toEqual({ type: 'MaxTurnsExceeded' });
      expect(other.difference).toMatchObject({ recorded: { what: 'done: Completed' }, got: { what: 'done: MaxTurnsExceeded' } });
    } finally {
      await store.close();
    }
  }, 30_000);
});
