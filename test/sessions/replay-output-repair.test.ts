/**
 * Replay of a run whose structured answer was sent back to the model: an answer that does not
 * match the output schema goes back with its issues (the driver steers the feedback in, then the
 * reply), and the model answers again; past `outputRetries` the run fails
 * `StructuredOutputError`. Each session is made on a real SQLite file and replayed from it: the
 * unchanged recording replays with no divergence.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../machines/agent.machine.js';
import type { AgentConfig } from '../../src/agent/core/config.js';
import { scriptedModel, type ScriptEntry } from '../../src/models/scripted.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { replaySession } from '../../src/sessions/replay.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-replay-repair-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const Total = z.object({ total: z.number() });
const answer = (args: unknown): ScriptEntry => ({ toolCalls: [{ name: 'final_answer', args }] });

/** Runs one prompt in a session on its own SQLite file, then replays it from a second store on that file. */
async function recordAndReplay(name: string, config: Omit<AgentConfig, 'output'>) {
  const path = join(root, `${name}.db`);
  const store = new SqliteSessionStore({ path });
  const session = await DurableSession.open({ machine: createAgentMachine({ ...config, output: Total }), store, sessionId: name });
  session.send({ type: 'input', message: 'What is the total?' });
  let timer: NodeJS.Timeout | undefined;
  const output = await Promise.race([session.whenIdle(), new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('still running after 10 s')), 10_000)))]);
  clearTimeout(timer);
  await session.close();
  await store.close();
  const reader = new SqliteSessionStore({ path });
  try {
    return { output: output!, report: await replaySession(reader, name) };
  } finally {
    await reader.close();
  }
}

describe('replay of a structured answer sent back to the model', () => {
  it('through final_answer: invalid, then valid, replays with no divergence', async () => {
    const { output, report } = await recordAndReplay('tool', { model: scriptedModel([answer({ total: 'forty' }), answer({ total: 40 })]) });
    expect(output.outcome).toMatchObject({ type: 'Completed', output: { total: 40 } });
    expect(report.divergence).toBeNull();
    expect(report.decisions).toEqual(['CallLLM turn 1', 'CallLLM turn 2', 'Done Completed']);
  });

  it('as JSON text: invalid twice, then valid, replays with no divergence', async () => {
    const { output, report } = await recordAndReplay('text', { model: scriptedModel([{ text: '{"total":"forty"}' }, { text: 'forty' }, { text: '{"total":40}' }]) });
    expect(output.outcome).toMatchObject({ type: 'Completed', output: { total: 40 } });
    expect(report.divergence).toBeNull();
    expect(report.decisions).toEqual(['CallLLM turn 1', 'CallLLM turn 2', 'CallLLM turn 3', 'Done Completed']);
  });

  it('past outputRetries: the run that failed StructuredOutputError replays with no divergence', async () => {
    const { output, report } = await recordAndReplay('failed', { model: scriptedModel([answer({ total: 'forty' }), answer({ total: 'still forty' })]), outputRetries: 1 });
    expect(output.outcome).toMatchObject({ type: 'Failed', error: { type: 'StructuredOutputError' } });
    expect(report.divergence).toBeNull();
    expect(report.decisions).toEqual(['CallLLM turn 1', 'CallLLM turn 2', 'Done Failed StructuredOutputError']);
  });
});
