import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { waitFor } from 'xstate';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { Model } from '../../../src/model.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { decodeRow, encodeRow } from '../../../src/sessions/session-row.js';
import { freshAgentContext } from '../../../src/agent/core/context.js';
import { PolicySchema } from '../../../src/schemas.js';
import { SqliteSessionStore } from '../../../src/stores/sqlite.js';
import { bundledCommand, runNode, type NodeCommand } from '../../sessions/fixtures/processes.js';

/**
 * Structured output in a durable session (issue 21): the answer is part of the recorded outcome
 * and another process reading the SQLite file sees it; the answers a run already sent back are
 * recorded too, so a run continued elsewhere keeps its bound. Rows written before outputs
 * existed still read.
 */

const City = z.object({ city: z.string(), population: z.number().int() });
let child: NodeCommand;
const root = mkdtempSync(join(tmpdir(), 'loopchart-output-'));
beforeAll(async () => {
  child = await bundledCommand(fileURLToPath(new URL('./fixtures/output-child.ts', import.meta.url)));
});
afterAll(() => {
  child?.dispose();
  rmSync(root, { recursive: true, force: true });
});

type Report = { outcome: { type: string; output?: unknown; error?: { type: string; message: string } } };
const reopen = async (path: string, sessionId: string, answer: Record<string, unknown>): Promise<Report> => {
  const b = await runNode([...child.args, JSON.stringify({ path, sessionId, answer })], { timeoutMs: 30_000 });
  expect(b.code, b.stderr).toBe(0);
  return JSON.parse(b.lines.at(-1)!) as Report;
};

describe('structured output in a durable session', () => {
  it('a completed run stores its output: another process reopening the SQLite file reads it on Completed', async () => {
    const path = join(root, 'completed.db');
    const store = new SqliteSessionStore({ path });
    const model = scriptedModel([{ toolCalls: [{ name: 'final_answer', args: { city: 'Lyon', population: 520_000 } }] }]);
    const a = await DurableSession.open({ machine: createAgentMachine({ model, output: City }), store, sessionId: 'done' });
    a.send({ type: 'input', message: 'A French city?' });
    const output = await a.whenIdle();
    expect(output?.outcome).toMatchObject({ type: 'Completed', output: { city: 'Lyon', population: 520_000 } });
    await a.close();
    await store.close();

    const report = await reopen(path, 'done', {});
    expect(report.outcome).toEqual({ type: 'Completed', finalText: '{"city":"Lyon","population":520000}', output: { city: 'Lyon', population: 520_000 } });
  });

  it('an answer sent back before the process stopped still counts: the run continued elsewhere fails at its bound', async () => {
    const path = join(root, 'midrun.db');
    const store = new SqliteSessionStore({ path });
    // Turn 1 answers wrongly; turn 2 never returns in this process.
    const model: Model = {
      name: 'stops',
      async generate(request) {
        if (request.messages.some((m) => m.role === 'assistant')) return new Promise(() => {});
        return { message: { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'final_answer', args: { city: 'Lyon' } }] }, finishReason: 'tool-calls' };
      },
    };
    const a = await DurableSession.open({ machine: createAgentMachine({ model, output: City, outputRetries: 1 }), store, sessionId: 'midrun' });
    a.send({ type: 'input', message: 'A French city?' });
    await waitFor(a.actor, (s) => s.context.outputState?.rejected === 1 && s.matches({ Running: 'AwaitingModel' }), { timeout: 5_000 });
    await a.flush();
    await a.close();
    await store.close();

    // Process B's model answers wrongly again: with one retry spent in A, the run fails here.
    const report = await reopen(path, 'midrun', { city: 'Lyon', population: 'many' });
    expect(report.outcome.type).toBe('Failed');
    expect(report.outcome.error).toMatchObject({ type: 'StructuredOutputError' });
    expect(report.outcome.error!.message).toMatch(/after 2 attempts: at population: /);
  });

  it('a row written before outputs existed reads as it was; a stored output that is not JSON is refused', () => {
    // A row as a build without outputs wrote it: no output on Completed, no outputState.
    const log = [
      { role: 'user' as const, content: 'hello' },
      { role: 'assistant' as const, content: 'hi' },
    ];
    const fresh = freshAgentContext({ sessionId: 'old', history: log, policy: PolicySchema.parse({}), queued: null });
    const row = JSON.parse(JSON.stringify(encodeRow({ ...fresh, runIndex: 1, lastRun: { outcome: { type: 'Completed', finalText: 'hi' }, usage: { inputTokens: 1, outputTokens: 1 } } })));
    expect('outputState' in row).toBe(false);
    const context = decodeRow('old', row, log);
    expect(context.lastRun!.outcome).toEqual({ type: 'Completed', finalText: 'hi' });
    expect(context.outputState).toBeUndefined();
    const withOutput = { ...row, lastRun: { ...row.lastRun, outcome: { type: 'Completed', finalText: '{}', output: { n: 1 } } } };
    expect(decodeRow('new', withOutput, log).lastRun!.outcome).toEqual({ type: 'Completed', finalText: '{}', output: { n: 1 } });
    const notJson = { ...row, lastRun: { ...row.lastRun, outcome: { type: 'Completed', finalText: '{}', output: { n: Number.NaN } } } };
    expect(() => decodeRow('bad', notJson, log)).toThrow(/output/);
  });
});
