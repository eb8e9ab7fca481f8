/**
 * Repetition detection: the same batch of calls (names and arguments, key order and call order
 * free) N times in a row gets a note instead of running, once more seals the run; near-identical
 * batches run; `false` turns it off. The rule is a pure function of the conversation.
 */
import { describe, expect, it } from 'vitest';
import { createActor, waitFor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { type AgentEmitted } from '../../../src/agent/protocol/actor-types.js';
import { MessageLog } from '../../../src/brain/message-log.js';
import { canonicalJson, identicalBatchesInRow, repetitionLimit, repetitionVerdict } from '../../../src/agent/repetition/repetition.js';
import { InvalidConfigError } from '../../../src/errors.js';
import { scriptedModel, type ScriptEntry } from '../../../src/models/scripted.js';
import type { Message } from '../../../src/schemas.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { replaySession } from '../../../src/sessions/replay.js';
import { readSessionTrace } from '../../../src/sessions/trace.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';
import { loadSessionView } from '../../../src/viewer/load.js';
import { rowsOf } from '../../../src/viewer/rows.js';

type Call = { name: string; args: unknown };
const batch = (calls: Call[], turn: number): Message[] => [
  { role: 'assistant', content: '', toolCalls: calls.map((call, i) => ({ id: `c${turn}_${i}`, ...call })) },
  ...calls.map((call, i) => ({ role: 'tool' as const, toolCallId: `c${turn}_${i}`, toolName: call.name, content: 'r' })),
];
/** A conversation of these batches, the last one without its results (the batch about to run). */
const conversation = (...batches: Call[][]): Message[] => {
  const messages: Message[] = [{ role: 'user', content: 'go' }];
  batches.forEach((calls, turn) => messages.push(...batch(calls, turn)));
  return messages.slice(0, messages.length - batches.at(-1)!.length);
};
const read = (path: string, extra: Record<string, unknown> = {}): Call => ({ name: 'read', args: { path, ...extra } });

describe('the repetition rule (pure)', () => {
  it('arguments compare with keys in any order, at any depth', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { y: 2, x: 1 }], c: null } })).toBe(canonicalJson({ a: { c: null, d: [1, { x: 1, y: 2 }] }, b: 1 }));
    expect(canonicalJson([1, 2])).not.toBe(canonicalJson([2, 1]));
  });

  it('counts identical batches back from the newest; key order and call order do not matter', () => {
    const a = { name: 'read', args: { path: 'a', lines: 10 } };
    const aSwapped = { name: 'read', args: { lines: 10, path: 'a' } };
    const b = read('b');
    expect(identicalBatchesInRow(conversation([a, b], [b, aSwapped], [aSwapped, b]), 10)).toBe(3);
    expect(repetitionVerdict(conversation([a], [aSwapped], [a]), 3)).toEqual({ type: 'note', times: 3 });
    expect(repetitionVerdict(conversation([a], [a]), 3)).toEqual({ type: 'run' });
    expect(repetitionVerdict(conversation([a], [a], [a], [a]), 3)).toEqual({ type: 'seal', reason: 'repetition: read({"lines":10,"path":"a"}) asked for 4 times in a row' });
    // History and pending are one conversation.
    const all = conversation([a], [a], [a]);
    expect(repetitionVerdict(MessageLog.of(all.slice(0, 3), all.slice(3)), 3)).toEqual({ type: 'note', times: 3 });
  });

  it('near-identical batches do not count: other arguments, another tool, one call more, a user message between', () => {
    expect(identicalBatchesInRow(conversation([read('a')], [read('b')], [read('a')]), 10)).toBe(1);
    expect(identicalBatchesInRow(conversation([read('a')], [read('a', { lines: 1 })], [read('a')]), 10)).toBe(1);
    expect(identicalBatchesInRow(conversation([read('a')], [{ name: 'list', args: { path: 'a' } }], [read('a')]), 10)).toBe(1);
    expect(identicalBatchesInRow(conversation([read('a'), read('a')], [read('a')]), 10)).toBe(1);
    const steered = conversation([read('a')], [read('a')], [read('a')]);
    steered.splice(4, 0, { role: 'user', content: 'try harder' });
    expect(identicalBatchesInRow(steered, 10)).toBe(1);
    expect(repetitionVerdict(conversation([read('a')], [read('a')], [read('a')], [read('a')]), null)).toEqual({ type: 'run' });
  });

  it('the limit: default 3, false is off, anything but a whole number of at least 2 is refused at machine creation', () => {
    expect(repetitionLimit(undefined)).toBe(3);
    expect(repetitionLimit(false)).toBeNull();
    expect(repetitionLimit(5)).toBe(5);
    const model = scriptedModel([{ text: 'hi' }]);
    for (const bad of [1, 0, 2.5, -3, '3', true, null]) {
      expect(() => createAgentMachine({ model, repetition: bad as never })).toThrow(InvalidConfigError);
    }
  });
});

/** An agent whose model asks for these batches in turn, then answers; the tool counts its runs. */
function stuckMachine(batches: Call[][], options: { repetition?: number | false } = {}) {
  const runs: unknown[] = [];
  const tool = defineTool({ name: 'read', description: 'Reads a file.', input: z.object({ path: z.string(), lines: z.number().optional() }), execute: (args) => (runs.push(args), `text of ${args.path}`) });
  const seen: Message[][] = [];
  const script: ScriptEntry[] = [
    ...batches.map((calls): ScriptEntry => (request) => (seen.push([...request.messages]), { toolCalls: calls })),
    (request) => (seen.push([...request.messages]), { text: 'done' }),
  ];
  const machine = createAgentMachine({ model: scriptedModel(script), tools: [tool], policy: { maxTurns: 20 }, ...options });
  return { machine, runs, seen };
}

function stuckAgent(batches: Call[][], options: { repetition?: number | false } = {}) {
  const { machine, runs, seen } = stuckMachine(batches, options);
  const actor = createActor(machine, { input: { prompt: 'read a' } });
  const emitted: AgentEmitted[] = [];
  actor.on('*', (event) => emitted.push(event));
  actor.start();
  return { actor, runs, seen, emitted };
}

describe('an agent stuck repeating itself', () => {
  it('the 3rd identical batch is not run: the model reads a note instead; a different batch next goes on as usual', async () => {
    const { actor, runs, seen, emitted } = stuckAgent([[read('a')], [read('a')], [read('a')], [read('b')]]);
    const done = await waitFor(actor, (s) => s.status === 'done', { timeout: 5_000 });
    expect(done.output!.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    expect(runs).toEqual([{ path: 'a' }, { path: 'a' }, { path: 'b' }]);
    // What the 4th call saw as the 3rd batch's result.
    const note = seen[3]!.at(-1)!;
    expect(note).toMatchObject({ role: 'tool', toolName: 'read', isError: true });
    expect(note.content).toContain('not run. This is the 3rd time in a row you asked for exactly these tool calls');
    expect(emitted.filter((e) => e.type === 'repetition.noted')).toEqual([{ type: 'repetition.noted', turn: 3, times: 3, calls: [expect.objectContaining({ name: 'read' })] }]);
    // Listeners see the noted call finish like any other.
    expect(emitted.filter((e) => e.type === 'tool.finished').map((e) => (e as { result: { content: string } }).result.content.slice(0, 12))).toEqual([
      'text of a',
      'text of a',
      'error: not r',
      'text of b',
    ]);
  });

  it('asked for once more after the note, the run ends Sealed("repetition: …"); the sealed batch never runs', async () => {
    const { actor, runs } = stuckAgent([[read('a')], [read('a', {})], [read('a')], [read('a')], [read('a')]]);
    const done = await waitFor(actor, (s) => s.status === 'done', { timeout: 5_000 });
    expect(done.output!.outcome).toEqual({ type: 'Sealed', reason: 'repetition: read({"path":"a"}) asked for 4 times in a row' });
    expect(runs).toHaveLength(2);
    expect(done.context.brain.context.turnsTaken).toBe(4);
  });

  it('near-identical batches (other arguments each time) all run', async () => {
    const { actor, runs } = stuckAgent([[read('a')], [read('b')], [read('a')], [read('b')], [read('a')]]);
    const done = await waitFor(actor, (s) => s.status === 'done', { timeout: 5_000 });
    expect(done.output!.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    expect(runs).toHaveLength(5);
  });

  it('repetition: false runs every batch; a higher limit waits longer', async () => {
    const five = Array.from({ length: 5 }, () => [read('a')]);
    const off = stuckAgent(five, { repetition: false });
    const done = await waitFor(off.actor, (s) => s.status === 'done', { timeout: 5_000 });
    expect(done.output!.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    expect(off.runs).toHaveLength(5);

    const patient = stuckAgent(five, { repetition: 5 });
    const ended = await waitFor(patient.actor, (s) => s.status === 'done', { timeout: 5_000 });
    expect(ended.output!.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    expect(patient.runs).toHaveLength(4);
  });
});

describe('repetition in a durable session', () => {
  it('the note and the seal are recorded in the trace, shown by the viewer, and the session replays without divergence', async () => {
    const store = new MemorySessionStore();
    const { machine, runs } = stuckMachine(Array.from({ length: 5 }, () => [read('a')]));
    const session = await DurableSession.open({ machine, store, sessionId: 'stuck' });
    session.send({ type: 'input', message: 'read a' });
    const output = await session.whenIdle();
    await session.close();
    const reason = 'repetition: read({"path":"a"}) asked for 4 times in a row';
    expect(output!.outcome).toEqual({ type: 'Sealed', reason });
    expect(runs).toHaveLength(2);

    const entries = (await readSessionTrace(store, 'stuck')).flatMap((r) => ('entry' in r ? [r.entry] : []));
    expect(entries.filter((e) => e.type === 'repetition')).toEqual([expect.objectContaining({ type: 'repetition', run: 1, turn: 3, times: 3 })]);
    expect(entries.filter((e) => e.type === 'finished').map((e) => (e as { outcome: unknown }).outcome)).toEqual([{ type: 'Sealed', reason }]);

    const rows = rowsOf({ session: (await loadSessionView(store, 'stuck'))! }).rows;
    expect(rows.find((row) => row.kind === 'repetition')?.title).toBe('repetition: the same 1 call(s) asked for 3 times in a row: not run, the model got a note');
    expect(rows.find((row) => row.kind === 'outcome')?.title).toContain(`run 1 Sealed (${reason})`);

    const report = await replaySession(store, 'stuck');
    expect(report.divergence).toBeNull();
  });
});
