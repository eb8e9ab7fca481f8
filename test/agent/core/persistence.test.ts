/**
 * A session persisted mid-run (getPersistedSnapshot → JSON) and restored in a fresh actor built from
 * the same config ("another process"): same history as an uninterrupted run, in-flight calls repeated
 * with the same idempotency key, finished tool calls not run again.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createActor, type Snapshot } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { type AgentOutput } from '../../../src/agent/protocol/actor-types.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import type { Message } from '../../../src/schemas.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import {
  assistantCount,
  deferred,
  holdable,
  providerValid,
  runFinished,
  runInSession,
  sleepOrAbort,
  tick,
} from '../../support/driver.js';

const user = (content: string): Message => ({ role: 'user', content });
const SESSION = 'persist-1';

/** One "process": a fresh model and fresh tools from the same script and code; `blocking` makes fetch hang. */
function processWith(options: { blocking?: boolean } = {}) {
  const runs = { echo: [] as string[], fetch: [] as string[] };
  const echo = defineTool({
    name: 'echo',
    description: 'Returns its text',
    input: z.object({ text: z.string() }),
    execute: ({ text }, { idempotencyKey }) => {
      runs.echo.push(idempotencyKey);
      return text;
    },
  });
  const fetchPage = defineTool({
    name: 'fetch',
    description: 'Fetches a page',
    input: z.object({ url: z.string() }),
    execute: async ({ url }, { signal, idempotencyKey }) => {
      runs.fetch.push(idempotencyKey);
      if (options.blocking) await sleepOrAbort(60_000, signal);
      return `page ${url}`;
    },
  });
  const h = holdable(
    scriptedModel([
      {
        text: 'step 1',
        toolCalls: [
          { name: 'echo', args: { text: 'a' } },
          { name: 'fetch', args: { url: 'x' } },
        ],
        usage: { inputTokens: 10, outputTokens: 1 },
      },
      { text: 'step 2', toolCalls: [{ name: 'echo', args: { text: 'b' } }], usage: { inputTokens: 20, outputTokens: 1 } },
      { text: 'done', usage: { inputTokens: 30, outputTokens: 1 } },
    ]),
  );
  const machine = createAgentMachine({ model: h.model, tools: [echo, fetchPage] });
  return { h, runs, machine };
}

async function uninterrupted(): Promise<AgentOutput> {
  const { machine } = processWith();
  const actor = createActor(machine, { input: { sessionId: SESSION } });
  actor.start();
  const output = await runInSession(actor, 'go');
  actor.stop();
  return output;
}

// JSON.parse gives `any`, which is what a snapshot read back from storage is.
const roundTrip = (snapshot: Snapshot<unknown>) => JSON.parse(JSON.stringify(snapshot));

/** The inputs of the invoked service actors in a persisted snapshot. */
const childInputs = (persisted: unknown) =>
  Object.values((persisted as { children: Record<string, { snapshot: { input?: unknown } }> }).children).map(
    (child) => child.snapshot.input,
  );

describe('a session persisted mid-run', () => {
  // Stopping process A while a tool runs logs XState's "sent to stopped actor" warning (see the
  // cancellation suite's test for it); keep this suite's output quiet.
  beforeEach(() => {
    vi.spyOn(console, 'warn').mockImplementation(() => {});
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('while awaiting the model: restored, the call is made again with the same key and the run ends the same', async () => {
    const reference = await uninterrupted();
    expect(reference.outcome).toEqual({ type: 'Completed', finalText: 'done' });

    // Process A: hold turn 2's model call and persist while it is in flight.
    const a = processWith();
    const entered = a.h.hold((request) => assistantCount(request) === 1);
    const actorA = createActor(a.machine, { input: { sessionId: SESSION } });
    actorA.start();
    actorA.send({ type: 'input', message: 'go' });
    await entered;
    const live = actorA.getSnapshot();
    expect(live.matches({ Running: 'AwaitingModel' })).toBe(true);
    expect(live.context.brain.value).toBe('AwaitingModel');
    expect(live.context.brain.context.turnsTaken).toBe(1);
    const persisted = roundTrip(actorA.getPersistedSnapshot());
    actorA.stop();
    expect(a.h.seen.map((r) => r.idempotencyKey)).toEqual([`${SESSION}:run-1:turn-1:model`, `${SESSION}:run-1:turn-2:model`]);
    expect(a.h.seen[1]!.signal.aborted).toBe(true);
    // The only child is the IO actor, and it holds no input: the conversation never lands in a snapshot.
    expect(childInputs(persisted)).toEqual([undefined]);

    // Process B: same code and config, fresh objects.
    const b = processWith();
    const actorB = createActor(b.machine, { snapshot: persisted });
    actorB.start();
    const output = await runFinished(actorB, 1);

    expect(b.h.seen.map((r) => r.idempotencyKey)).toEqual([`${SESSION}:run-1:turn-2:model`, `${SESSION}:run-1:turn-3:model`]);
    expect(b.h.seen[0]!.messages).toEqual(a.h.seen[1]!.messages);
    expect(output).toEqual(reference);
    expect(providerValid(output.messages)).toBe(true);
    // Tools of turn 1 ran in A only; B ran turn 2's echo.
    expect(a.runs.echo).toEqual([`${SESSION}:run-1:turn-1:tools:call_1_0`]);
    expect(b.runs.echo).toEqual([`${SESSION}:run-1:turn-2:tools:call_2_0`]);
    expect(b.runs.fetch).toEqual([]);
  });

  it('while awaiting tools: finished calls are not run again, the unfinished one is, with the same key', async () => {
    const reference = await uninterrupted();

    const a = processWith({ blocking: true });
    const actorA = createActor(a.machine, { input: { sessionId: SESSION } });
    const echoDone = deferred();
    actorA.on('tool.finished', (e) => {
      if (e.call.name === 'echo') echoDone.resolve();
    });
    actorA.start();
    actorA.send({ type: 'input', message: 'go' });
    await echoDone.promise;
    await tick();
    const live = actorA.getSnapshot();
    expect(live.matches({ Running: 'AwaitingTools' })).toBe(true);
    expect(live.context.brain.value).toBe('AwaitingTools');
    expect(live.context.toolJournal).toEqual([{ role: 'tool', toolCallId: 'call_1_0', toolName: 'echo', content: 'a' }]);
    const persisted = roundTrip(actorA.getPersistedSnapshot());
    actorA.stop();
    expect(a.runs.fetch).toEqual([`${SESSION}:run-1:turn-1:tools:call_1_1`]);
    expect(childInputs(persisted)).toEqual([undefined]);

    const b = processWith({ blocking: false });
    const actorB = createActor(b.machine, { snapshot: persisted });
    const finishedInB: string[] = [];
    actorB.on('tool.finished', (e) => finishedInB.push(e.call.id));
    actorB.start();
    const output = await runFinished(actorB, 1);

    expect(output).toEqual(reference);
    expect(b.runs.fetch).toEqual([`${SESSION}:run-1:turn-1:tools:call_1_1`]);
    expect(b.runs.echo).toEqual([`${SESSION}:run-1:turn-2:tools:call_2_0`]);
    expect(finishedInB).toEqual(['call_1_1', 'call_2_0']);
    expect(b.h.seen.map((r) => r.idempotencyKey)).toEqual([`${SESSION}:run-1:turn-2:model`, `${SESSION}:run-1:turn-3:model`]);
  });

  it('between runs (Idle): restored, the next run continues the conversation with the next run number', async () => {
    const a = processWith();
    const actorA = createActor(a.machine, { input: { sessionId: SESSION } });
    actorA.start();
    const first = await runInSession(actorA, 'go');
    const persisted = roundTrip(actorA.getPersistedSnapshot());
    actorA.stop();

    const answer = scriptedModel([
      { text: '' }, // three assistant messages in history: entries 1-3 are never asked
      { text: '' },
      { text: '' },
      { text: 'second run' },
    ]);
    const b = holdable(answer);
    const machine = createAgentMachine({ model: b.model, tools: [] });
    const actorB = createActor(machine, { snapshot: persisted });
    actorB.start();
    expect(actorB.getSnapshot().value).toBe('Idle');
    const second = await runInSession(actorB, 'again');
    expect(b.seen.map((r) => r.idempotencyKey)).toEqual([`${SESSION}:run-2:turn-1:model`]);
    expect(b.seen[0]!.messages).toEqual([...first.messages, user('again')]);
    expect(second.messages).toEqual([...first.messages, user('again'), { role: 'assistant', content: 'second run' }]);
  });
});
