/**
 * The Restate K/V layout keeps a step's cost independent of the conversation's length: a run on
 * a session with 2,000 messages writes exactly the keys a run on 10 messages writes (its new
 * positions, the log length, the row), never an old position. The writes are recorded from the
 * K/V calls `persistSession` makes, step by step, while a real agent actor runs.
 */
import type * as restate from '@restatedev/restate-sdk';
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../machines/agent.machine.js';
import type { Model } from '../../src/model.js';
import type { Message } from '../../src/schemas.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { persistSession, writtenOf } from '../../src/restate/kv-state.js';

const echo = defineTool({ name: 'echo', description: 'Echoes', input: z.object({ text: z.string() }), execute: ({ text }) => text });

/** The keys one run writes, in order, on a session that already holds `length` messages. */
async function keysWrittenByOneRun(length: number): Promise<string[]> {
  const history: Message[] = Array.from({ length }, (_, i) =>
    i % 2 === 0 ? { role: 'user', content: `question ${i}` } : { role: 'assistant', content: `answer ${i}` },
  );
  // Asks for one tool call, then answers: whatever the conversation before.
  const model: Model = {
    name: 'one-tool-call',
    generate: async ({ messages }) =>
      messages.at(-1)?.role === 'tool'
        ? { message: { role: 'assistant', content: 'done' }, finishReason: 'stop' }
        : { message: { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'echo', args: { text: 'hi' } }] }, finishReason: 'tool-calls' },
  };
  const machine = createAgentMachine({ model, tools: [echo] });
  const actor = createActor(machine, { input: { sessionId: 's', history } });
  const writes: string[] = [];
  const ctx = {
    set: (key: string) => void writes.push(`set ${key}`),
    clear: (key: string) => void writes.push(`clear ${key}`),
  } as unknown as restate.ObjectContext;
  let written = writtenOf(actor.getSnapshot().context, true);
  actor.subscribe((snapshot) => (written = persistSession(ctx, snapshot.context, written)));
  actor.start();
  actor.send({ type: 'input', message: 'go' });
  await new Promise<void>((resolve) => {
    const check = () => actor.getSnapshot().context.lastRun !== null && actor.getSnapshot().value === 'Idle';
    if (check()) resolve();
    actor.subscribe(() => check() && resolve());
  });
  expect(actor.getSnapshot().context.lastRun?.outcome).toEqual({ type: 'Completed', finalText: 'done' });
  actor.stop();
  // Positions relative to the end of the old log, so runs on different lengths compare.
  return writes.map((write) => write.replace(/log:(\d+)$/, (_, i: string) => `log:+${Number(i) - length}`));
}

describe('Restate K/V state', () => {
  it('a run writes the same keys on 10 and on 2,000 messages: its own positions, the length, the row', async () => {
    const short = await keysWrittenByOneRun(10);
    const long = await keysWrittenByOneRun(2_000);
    expect(long).toEqual(short);
    // The run adds 4 messages (user, assistant with the call, tool result, final answer).
    expect(short.filter((write) => write.startsWith('set log:'))).toEqual(['set log:+0', 'set log:+1', 'set log:+2', 'set log:+3']);
    expect(short.some((write) => /log:\+-/.test(write) || write.startsWith('clear'))).toBe(false);
  });
});
