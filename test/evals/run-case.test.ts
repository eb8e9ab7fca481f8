import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { beforeAll, describe, expect, it } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { scoreCase } from '../../src/evals/run-eval.js';
import { outputEquals } from '../../src/evals/scorers.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { recordCase } from '../../src/evals/record.js';
import { runCase } from '../../src/evals/run-case.js';
import { EvalCaseError, EvalOptionsError } from '../../src/evals/errors.js';
import type { EvalCase } from '../../src/evals/dataset.js';
import { MemorySessionStore } from '../../src/stores/memory.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import type { StoredSession } from '../../src/stores/session-store.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { calls, lookup, recordSession, supportAgent } from './support.js';

const store = new MemorySessionStore();
let recorded: EvalCase;

beforeAll(async () => {
  await recordSession(store, 'support-1');
  recorded = await recordCase(store, 'support-1');
  calls.lookup = 0;
});

describe('runCase', () => {
  it('a dry run of the unchanged agent decides as recorded and calls no tool', async () => {
    const run = await runCase(recorded, supportAgent([]), { model: 'recorded' });
    expect(run.outcome).toEqual({ type: 'Completed', finalText: 'Order A1 was delivered; the total was 40.' });
    expect(run.difference).toBeNull();
    expect(run.decisions.map((d) => d.kind)).toEqual(['model', 'tools', 'model', 'done']);
    expect(run.toolCalls).toEqual([{ name: 'lookup', args: { order: 'A1' }, content: '{"order":"A1","status":"delivered","total":40}', isError: false, source: 'recorded' }]);
    expect(run.usage).toEqual({ inputTokens: 130, outputTokens: 22 });
    expect(calls.lookup).toBe(0);
  });

  it('a live tool runs; a call the recording lacks gets an unrecorded-call result and the run goes on', async () => {
    const script = [{ toolCalls: [{ name: 'lookup', args: { order: 'B2' } }] }, { text: 'done' }];
    const quarantined = await runCase(recorded, supportAgent(script));
    expect(quarantined.toolCalls[0]).toMatchObject({ name: 'lookup', source: 'unrecorded', isError: true });
    expect(quarantined.toolCalls[0]!.content).toMatch(/^unrecorded call: the recording has no result for lookup\(\{"order":"B2"\}\)/);
    expect(calls.lookup).toBe(0);
    const live = await runCase(recorded, supportAgent(script), { liveTools: ['lookup'] });
    expect(live.toolCalls[0]).toMatchObject({ source: 'live', isError: false });
    expect(calls.lookup).toBe(1);
    // The live model asked for another order: the first difference is the tool batch, with its rule.
    expect(live.difference).toMatchObject({ step: 2, recorded: { what: 'call tools lookup({"order":"A1"})' }, got: { what: 'call tools lookup({"order":"B2"})', rule: 'brain: CallTools (the reply asked for tools)' } });
  });

  it('a lower maxTurns shows as the first differing decision, with the brain rule that took it', async () => {
    const run = await runCase(recorded, supportAgent([], { policy: { maxTurns: 1 } }), { model: 'recorded' });
    expect(run.outcome.type).toBe('MaxTurnsExceeded');
    expect(run.difference).toMatchObject({
      step: 3,
      recorded: { what: 'call the model (turn 2) offering [lookup, refund]' },
      got: { what: 'done: MaxTurnsExceeded', rule: 'brain: turnLimitReached (policy.maxTurns)' },
    });
  });

  it('a tool no longer offered is the first difference of a dry run', async () => {
    const run = await runCase(recorded, supportAgent([], { tools: [lookup] }), { model: 'recorded', allowMissingTools: true });
    expect(run.difference).toMatchObject({ step: 1, recorded: { what: 'call the model (turn 1) offering [lookup, refund]' }, got: { what: 'call the model (turn 1) offering [lookup]' } });
  });

  it('a recording that calls a tool the agent lost is a typed error naming the case', async () => {
    const error = await runCase(recorded, supportAgent([], { tools: [] }), { model: 'recorded' }).catch((e: unknown) => e);
    expect(EvalCaseError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ caseId: 'support-1', problem: 'tools', message: "case 'support-1': the recording calls tools the agent no longer has: lookup" });
  });

  it('an agent function that throws fails its case with problem agent', async () => {
    const error = await runCase(recorded, () => {
      throw new Error('no API key');
    }).catch((e: unknown) => e);
    expect(error).toMatchObject({ problem: 'agent', message: "case 'support-1': the agent could not be had: no API key" });
  });

  it('a dry run past the recording fails the run with an unrecorded model call', async () => {
    // The first reply now has no lookup result to read: the recorded model ran out after 2 turns.
    const cut: EvalCase = { ...recorded, recording: { ...recorded.recording!, trace: recorded.recording!.trace.filter((e) => !(e.type === 'model' && e.turn === 2)) } };
    const run = await runCase(cut, supportAgent([]), { model: 'recorded' });
    expect(run.outcome).toMatchObject({ type: 'Failed', error: { type: 'ModelError', message: expect.stringContaining('unrecorded model call: the recording has no reply for run 1, turn 2') } });
  });

  it('keeps the structured answer the agent validated, live and in a dry run', async () => {
    const schema = z.object({ refund: z.boolean() });
    const answering = () => ({ model: scriptedModel([{ toolCalls: [{ name: 'final_answer', args: { refund: true } }] }]), output: schema });
    const hand: EvalCase = { format: 1, id: 'structured', input: ['answer'], expect: { output: { equals: { refund: true } } } };
    const live = await runCase(hand, answering());
    expect(live.outcome).toMatchObject({ type: 'Completed', output: { refund: true } });
    expect(live.output).toEqual({ refund: true });
    expect(await scoreCase(hand, live, [outputEquals({ refund: true })])).toMatchObject({ 'output equals': { score: 1, pass: true } });

    const structuredStore = new MemorySessionStore();
    await recordSession(structuredStore, 'structured-1', answering(), 'answer');
    const dry = await runCase(await recordCase(structuredStore, 'structured-1'), answering(), { model: 'recorded' });
    expect(dry.output).toEqual({ refund: true });
  });

  it('options out of range are a typed error naming the option, before anything runs', async () => {
    const error = await runCase(recorded, supportAgent([]), { model: 'recorded', timeoutMs: Number.NaN }).catch((e: unknown) => e);
    expect(EvalOptionsError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ code: 'InvalidConfig', option: 'timeoutMs', message: expect.stringMatching(/^runCase option 'timeoutMs': .*got NaN$/) });
  });

  it("a session made by another writer while the run opens its own is refused, never continued", async () => {
    // A SQLite file whose first load of the eval's session answers late (held until released, at
    // most 5 s), as a busy store does: it finds no session, and another writer makes one meanwhile.
    const dir = mkdtempSync(join(tmpdir(), 'eval-race-'));
    let release!: () => void;
    let reached!: () => void;
    const held = new Promise<void>((resolve) => (reached = resolve));
    const released = Promise.race([new Promise<void>((resolve) => (release = resolve)), new Promise<void>((resolve) => setTimeout(resolve, 5_000))]);
    let armed = true;
    class LateStore extends SqliteSessionStore {
      override async load(sessionId: string): Promise<StoredSession | undefined> {
        const row = await super.load(sessionId);
        if (armed && sessionId === 'eval-race') {
          armed = false;
          reached();
          await released;
        }
        return row;
      }
    }
    const file = new LateStore({ path: join(dir, 'runs.db') });
    try {
      const running = runCase(recorded, supportAgent([]), { model: 'recorded', store: file, sessionId: 'eval-race' }).catch((e: unknown) => e);
      await held;
      const other = await DurableSession.open({ machine: createAgentMachine({ model: scriptedModel([{ text: 'Your card ends in 4242.' }]) }), store: file, sessionId: 'eval-race' });
      other.send({ type: 'input', message: 'Which card did I use?' });
      await other.whenIdle();
      await other.close();
      const before = await file.load('eval-race');
      release();
      const error = await running;
      // Before: the run opened the other writer's session and sent its prompt into it (its history
      // then held 'Where is order A1?' after the other conversation), as if it were the run's own.
      expect(EvalCaseError.isInstance(error)).toBe(true);
      expect(error).toMatchObject({ message: expect.stringContaining("session 'eval-race' already exists in the store") });
      const after = await file.load('eval-race');
      expect(after!.version).toBe(before!.version);
      expect(after!.messages.map((m) => m.content)).toEqual(['Which card did I use?', 'Your card ends in 4242.']);
    } finally {
      release();
      await file.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

