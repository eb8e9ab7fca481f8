/**
 * Exactly one delivery (issue 26, item 4): every event a client may show carries a delivery id
 * derived from its run, turn and position; a reply streamed before a retry or a crash and made
 * again after it is announced by `text.retracted`; usage is counted once per model call.
 *  - a stream that errors after some text and is retried: the UI's text (retractions applied) is
 *    the reply once, not the failed attempt's text followed by the reply;
 *  - a client that reconnects at every event position (replay after its last id) sees each
 *    event exactly once, and the ids are the same in a second run of the same script;
 *  - a process that dies at every event position of a run on a real SQLite file, continued by a
 *    second DurableSession on the same file with a model that answers differently: the client
 *    that keeps what it had and takes what the second process emits shows each tool result, each
 *    turn's reply and the outcome once, and the text it shows is the committed history's;
 *  - usage totals equal the sum over the model calls the trace records, under retries and a crash.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createActor, toPromise } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { type AgentEmitted } from '../../../src/agent/protocol/actor-types.js';
import { DeliveryIdSchema, DeliveryLedger, deliveryIds, nextAttempt, type DeliveredEvent } from '../../../src/agent/protocol/delivery.js';
import { ModelError, type Model } from '../../../src/model.js';
import type { Message, Usage } from '../../../src/schemas.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { readSessionTrace } from '../../../src/sessions/trace.js';
import type { SessionStore } from '../../../src/stores/session-store.js';
import { SqliteSessionStore } from '../../../src/stores/sqlite.js';
import { defineTool } from '../../../src/tools/define-tool.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-delivery-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const lookup = defineTool({ name: 'lookup', description: 'Looks a thing up.', input: z.object({ q: z.string() }), execute: ({ q }) => `${q} = 42` });

/**
 * Two turns (a tool call, then an answer), each streamed in three chunks; `tag` makes the text of
 * each process its own. With `failFirst`, turn 2's first attempt streams two chunks, then fails
 * as a retryable stream error (as llama-server's error event after some text).
 */
function streamingModel(tag: string, options: { failFirst?: boolean } = {}): Model & { replies: Usage[] } {
  let failed = !options.failFirst;
  const replies: Usage[] = [];
  return {
    name: 'streaming',
    replies,
    async generate(request) {
      const turn = request.messages.filter((m) => m.role === 'assistant').length + 1;
      const text = turn === 1 ? `Looking it up (${tag}).` : `The answer is 42 (${tag}).`;
      const chunks = [text.slice(0, 5), text.slice(5, 12), text.slice(12)];
      for (const [i, chunk] of chunks.entries()) {
        await new Promise((resolve) => setTimeout(resolve, 1));
        if (turn === 2 && !failed && i === 2) {
          failed = true;
          throw new ModelError('stream ended with an error event', { retryable: true });
        }
        request.onTextDelta?.(chunk);
      }
      const usage = { inputTokens: 10 * turn, outputTokens: 3 + turn };
      replies.push(usage);
      return {
        message: { role: 'assistant', content: text, ...(turn === 1 && { toolCalls: [{ id: 'c1', name: 'lookup', args: { q: 'x' } }] }) },
        finishReason: turn === 1 ? 'tool-calls' : 'stop',
        usage,
      };
    },
  };
}

const agent = (model: Model) => createAgentMachine({ model, tools: [lookup], retry: { baseDelayMs: 0, sleep: async () => {} } });
const shown = (event: AgentEmitted): event is AgentEmitted & DeliveredEvent => 'id' in event;

async function recordedRun(model: Model): Promise<(AgentEmitted & DeliveredEvent)[]> {
  const actor = createActor(agent(model), { input: { prompt: 'What is x?' } });
  const log: (AgentEmitted & DeliveredEvent)[] = [];
  actor.on('*', (event) => shown(event as AgentEmitted) && log.push(event as AgentEmitted & DeliveredEvent));
  await toPromise(actor.start());
  return log;
}

const assistantTexts = (messages: readonly Message[]) => messages.filter((m) => m.role === 'assistant').map((m) => m.content);

describe('delivery ids', () => {
  it('are checked where they come back from a client, and an attempt counts per step', () => {
    expect(DeliveryIdSchema.safeParse(deliveryIds.text(2, 3, 1, 7)).success).toBe(true);
    expect(DeliveryIdSchema.safeParse(deliveryIds.toolFinished(1, 1, 'call/with/slashes')).success).toBe(true);
    for (const bad of ['', '1/2', 'x/1/start', '1/1/text/1', '1/1/reply/', '1/1/other']) expect(DeliveryIdSchema.safeParse(bad).success, bad).toBe(false);
    expect(nextAttempt(null, 'k')).toEqual({ key: 'k', attempt: 1 });
    expect(nextAttempt({ key: 'k', attempt: 2 }, 'k')).toEqual({ key: 'k', attempt: 3 });
    expect(nextAttempt({ key: 'k', attempt: 2 }, 'other')).toEqual({ key: 'other', attempt: 1 });
  });

  it('a stream that fails after some text and is retried: its text is retracted, the UI shows the reply once', async () => {
    const model = streamingModel('A', { failFirst: true });
    const log = await recordedRun(model);
    const retraction = log.find((e) => e.type === 'text.retracted');
    expect(retraction).toMatchObject({ id: '1/2/retract/1', turn: 2, attempt: 1, reason: 'retry' });
    const ledger = new DeliveryLedger();
    for (const event of log) ledger.accept(event);
    expect(ledger.text('1/1')).toBe('Looking it up (A).');
    expect(ledger.text('1/2')).toBe('The answer is 42 (A).');
    // The retried attempt's deltas have ids of their own: both attempts streamed, the first is void.
    expect(log.filter((e) => e.type === 'text.delta' && e.turn === 2).map((e) => e.id)).toEqual([
      '1/2/text/1/0',
      '1/2/text/1/1',
      '1/2/text/2/0',
      '1/2/text/2/1',
      '1/2/text/2/2',
    ]);
    expect(ledger.events().filter((e) => e.type === 'turn.finished').map((e) => e.id)).toEqual(['1/1/reply/1', '1/2/reply/2']);
  });

  it('a client that reconnects at every event position sees each event exactly once; a second run has the same ids', async () => {
    const log = await recordedRun(streamingModel('A', { failFirst: true }));
    const ids = log.map((e) => e.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect((await recordedRun(streamingModel('A', { failFirst: true }))).map((e) => e.id)).toEqual(ids);
    for (let k = 0; k <= log.length; k++) {
      const ledger = new DeliveryLedger();
      const received = log.slice(0, k);
      for (const event of received) ledger.accept(event);
      // Reconnect: the server sends what follows the last id the client has.
      const after = k === 0 ? 0 : ids.indexOf(received.at(-1)!.id) + 1;
      const replayed = log.slice(after);
      for (const event of replayed) expect(ledger.accept(event), `position ${k}: ${event.id}`).toBe(true);
      expect([...received, ...replayed].map((e) => e.id)).toEqual(ids);
      expect(ledger.text('1/2')).toBe('The answer is 42 (A).');
    }
  });
});

/** A store whose writes never land once `crash()` is called: the process died there. */
function dyingStore(inner: SessionStore): SessionStore & { crash(): void } {
  let dead = false;
  const unlessDead = <A extends unknown[], R>(write: (...args: A) => Promise<R>) => (...args: A): Promise<R> => (dead ? new Promise<R>(() => {}) : write(...args));
  return {
    load: (id) => inner.load(id),
    list: () => inner.list(),
    journaledToolResults: (id, key) => inner.journaledToolResults(id, key),
    close: () => inner.close(),
    apply: unlessDead((id, write) => inner.apply(id, write)),
    journalToolResult: unlessDead((id, key, result) => inner.journalToolResult(id, key, result)),
    appendTrace: unlessDead((id, entries) => inner.appendTrace!(id, entries)),
    readTrace: (id, after) => inner.readTrace!(id, after),
    crash: () => (dead = true),
  };
}

describe('a run that dies at every event position and is continued by another process', () => {
  it('shows each event once, the committed text, and counts usage once per recorded model call', async () => {
    const positions = (await recordedRun(streamingModel('A', { failFirst: true }))).length;
    for (let k = 1; k < positions; k++) {
      const path = join(root, `crash-${k}.db`);
      const ledger = new DeliveryLedger();
      // Process A: the client sees events until A dies at event k; nothing A writes after that lands.
      const storeA = dyingStore(new SqliteSessionStore({ path }));
      const modelA = streamingModel('A', { failFirst: true });
      let seen = 0;
      const died = new Promise<void>((resolve) => {
        void DurableSession.open({
          machine: agent(modelA),
          store: storeA,
          sessionId: 's',
          attach: (actor) =>
            actor.on('*', (event) => {
              if (seen >= k || !shown(event as AgentEmitted)) return;
              ledger.accept(event as DeliveredEvent);
              if (++seen === k) {
                storeA.crash();
                queueMicrotask(() => (actor.stop(), resolve()));
              }
            }),
        }).then((session) => session.send({ type: 'input', message: 'What is x?' }));
      });
      await died;
      // Process B: the same file, a model that answers in its own words; the client takes everything.
      const storeB = new SqliteSessionStore({ path });
      const modelB = streamingModel('B');
      const session = await DurableSession.open({
        machine: agent(modelB),
        store: storeB,
        sessionId: 's',
        attach: (actor) => actor.on('*', (event) => shown(event as AgentEmitted) && ledger.accept(event as DeliveredEvent)),
      });
      if (session.actor.getSnapshot().context.runIndex === 0) session.send({ type: 'input', message: 'What is x?' });
      const output = (await session.whenIdle())!;
      expect(output.outcome.type, `crash at ${k}`).toBe('Completed');
      const events = ledger.events();
      const once = (type: string) => events.filter((e) => e.type === type).map((e) => e.id);
      expect(once('tool.started'), `crash at ${k}`).toEqual(['1/1/tool-started/c1']);
      expect(once('tool.finished'), `crash at ${k}`).toEqual(['1/1/tool-finished/c1']);
      expect(once('run.finished'), `crash at ${k}`).toEqual(['1/2/finish']);
      expect(once('turn.finished').map((id) => id.split('/')[1]), `crash at ${k}`).toEqual(['1', '2']);
      // What the client shows is what the session committed, each turn once (retractions applied).
      expect([ledger.text('1/1'), ledger.text('1/2')], `crash at ${k}`).toEqual(assistantTexts(output.messages));
      // Usage: each model call the trace records counts once, whichever process made it, retries included.
      const calls = (await readSessionTrace(storeB, 's')).flatMap((read) => {
        const entry = 'entry' in read ? read.entry : undefined;
        return entry?.type === 'model' && entry.reply?.usage ? [entry.reply.usage as Usage] : [];
      });
      const sum = calls.reduce((a, u) => ({ inputTokens: a.inputTokens + u.inputTokens, outputTokens: a.outputTokens + u.outputTokens }), { inputTokens: 0, outputTokens: 0 });
      expect(calls).toHaveLength(2);
      expect(output.usage, `crash at ${k}`).toEqual(sum);
      expect(session.actor.getSnapshot().context.sessionUsage).toEqual(sum);
      await session.close();
      await storeB.close();
    }
  }, 60_000);
});
