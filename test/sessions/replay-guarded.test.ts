/**
 * Replay of sessions the driver shapes beyond the brain: an output guardrail's feedback (the
 * reply held until the verdicts, then the feedback as a user message) and a structured answer
 * given through the `final_answer` tool (kept as text, its call never run). Each session is
 * made on a real SQLite file and must replay with no divergence.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../machines/agent.machine.js';
import type { Guardrail } from '../../src/agent/guardrails/guardrails.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { replaySession } from '../../src/sessions/replay.js';
import { answerAsText, settleHeldReply } from '../../src/sessions/replay-guard.js';
import type { TraceEntryOf } from '../../src/sessions/trace.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import { readFileTool } from '../../src/tools/builtin.js';
import { pathRule } from '../../src/agent/approvals/builtin-policies.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-replay-guarded-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Runs `message` once in a fresh session on its own SQLite file, then replays it from that file. */
async function runThenReplay(name: string, machine: ReturnType<typeof createAgentMachine>, message: string) {
  const path = join(root, `${name}.db`);
  const store = new SqliteSessionStore({ path });
  const session = await DurableSession.open({ machine, store, sessionId: name });
  session.send({ type: 'input', message });
  const output = await session.whenIdle();
  await session.close();
  await store.close();
  const reopened = new SqliteSessionStore({ path });
  try {
    return { output, stored: (await reopened.load(name))!, report: await replaySession(reopened, name) };
  } finally {
    await reopened.close();
  }
}

const citesDocs: Guardrail = { name: 'cites-docs', check: ({ text }) => (text.includes('docs/') ? { type: 'pass' } : { type: 'feedback', message: 'Cite the docs.' }) };

describe('replay of guarded and structured sessions', () => {
  it('an output guardrail that sent feedback once: the replay holds the reply and applies the feedback as the driver did', async () => {
    const model = scriptedModel([{ text: 'Refunds take 5 days.' }, { text: 'Refunds take 5 days (docs/refunds.md).' }]);
    const { output, stored, report } = await runThenReplay('feedback', createAgentMachine({ model, guardrails: { output: [citesDocs] } }), 'How long do refunds take?');
    expect(output?.outcome).toEqual({ type: 'Completed', finalText: 'Refunds take 5 days (docs/refunds.md).' });
    expect(stored.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    expect(report.divergence).toBeNull();
    expect(report.decisions).toEqual(['CallLLM turn 1', 'CallLLM turn 2', 'Done Completed']);
  }, 30_000);

  it('a structured answer through the final_answer tool replays with no divergence', async () => {
    const model = scriptedModel([{ toolCalls: [{ id: 'fa_1', name: 'final_answer', args: { answer: 'five days' } }] }]);
    const machine = createAgentMachine({ model, output: z.object({ answer: z.string() }) });
    const { output, report } = await runThenReplay('structured', machine, 'How long do refunds take?');
    expect(output?.outcome).toMatchObject({ type: 'Completed', output: { answer: 'five days' } });
    expect(report.divergence).toBeNull();
    expect(report.decisions).toEqual(['CallLLM turn 1', 'Done Completed']);
  }, 30_000);

  it('feedback past its rounds trips the run: the held reply is never fed, and the replay ends Failed as the run did', async () => {
    const model = scriptedModel([{ text: 'Five days.' }, { text: 'Still five days.' }]);
    const machine = createAgentMachine({ model, guardrails: { output: [citesDocs], maxFeedback: 1 } });
    const { output, report } = await runThenReplay('tripped', machine, 'How long do refunds take?');
    expect(output?.outcome).toMatchObject({ type: 'Failed', error: { type: 'GuardrailTripped' } });
    expect(report.divergence).toBeNull();
    expect(report.decisions).toEqual(['CallLLM turn 1', 'CallLLM turn 2', 'Done Failed GuardrailTripped']);
  }, 30_000);
});

describe('the replay rules for a reply the driver reshapes', () => {
  const call = (id: string, name: string) => ({ id, name, args: { answer: 'x' } });
  const verdictEntry = (verdict: TraceEntryOf<'guardrail'>['verdict'], error?: { type: string; message: string }): TraceEntryOf<'guardrail'> => ({
    type: 'guardrail', at: 0, ms: 1, run: 1, turn: 1, key: 'k:g', check: 'k', stage: 'output', name: 'g',
    ...(verdict && { verdict }), ...(error && { error }),
  } as TraceEntryOf<'guardrail'>);

  it('answerAsText: a lone offered final_answer call becomes its JSON text; anything else is fed as recorded', () => {
    const lone = { message: { role: 'assistant' as const, content: '', toolCalls: [call('a', 'final_answer')] }, finishReason: 'tool-calls' };
    expect(answerAsText(lone, ['final_answer'])).toEqual({ message: { role: 'assistant', content: '{"answer":"x"}' }, finishReason: 'stop' });
    expect(answerAsText(lone, [])).toBe(lone);
    const mixed = { message: { role: 'assistant' as const, content: '', toolCalls: [call('a', 'final_answer'), call('b', 'search')] } };
    expect(answerAsText(mixed, ['final_answer', 'search'])).toBe(mixed);
  });

  it('settleHeldReply: pass applies, feedback is joined into one user message, a trip or a guardrail failure stops', () => {
    expect(settleHeldReply([verdictEntry({ type: 'pass' })], null)).toEqual({ type: 'apply' });
    expect(settleHeldReply([verdictEntry({ type: 'feedback', message: 'A.' }), verdictEntry({ type: 'feedback', message: 'B.' })], null)).toEqual({
      type: 'feedback',
      message: { role: 'user', content: 'Your answer was not accepted:\nA.\n\nB.\nAnswer again.' },
    });
    expect(settleHeldReply([verdictEntry({ type: 'trip' })], null)).toEqual({ type: 'stopped' });
    expect(settleHeldReply([verdictEntry(undefined, { type: 'GuardrailError', message: 'timed out' })], null)).toEqual({ type: 'stopped' });
    const tripped = { type: 'finished', run: 1, outcome: { type: 'Failed', error: { type: 'GuardrailTripped', message: 'still refused' } } } as unknown as TraceEntryOf<'finished'>;
    expect(settleHeldReply([verdictEntry({ type: 'feedback', message: 'A.' })], tripped)).toEqual({ type: 'stopped' });
  });
});

describe('replay of a call a tool policy denied', () => {
  it('the denial the next model call was given is its result: no divergence against the stored log', async () => {
    const dir = mkdtempSync(join(root, 'files-'));
    const model = scriptedModel([{ toolCalls: [{ id: 'c1', name: 'read_file', args: { path: 'secrets.txt' } }] }, { text: 'I may not read it.' }]);
    const machine = createAgentMachine({ model, tools: [readFileTool({ root: dir })], toolPolicy: pathRule({ roots: [join(dir, 'docs')], base: dir }) });
    const { stored, report } = await runThenReplay('denied', machine, 'Read secrets.txt.');
    expect(stored.messages[2]).toMatchObject({ role: 'tool', toolCallId: 'c1', content: expect.stringContaining('denied') });
    expect(report.divergence).toBeNull();
  }, 30_000);
});
