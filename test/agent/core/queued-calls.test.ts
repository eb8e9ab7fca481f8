/**
 * A call queued behind `toolConcurrency` is not running: listeners hear `tool.started` for it when
 * its `execute` really starts, not when the batch is asked for. Before, a batch without approvals
 * was announced whole at once by the chart (toolConcurrency 1, three 150 ms calls: the third's
 * `tool.started` came ~300 ms before its execute); a batch with approvals already was announced
 * call by call by the IO. A batch held by a pausing time limit announces its queued calls once,
 * after the raise, as they start (before: at the batch's start, before the pause). Real actors over the scripted model, a tool gated per call; in memory
 * and through a DurableSession on a real SQLite file.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createActor, waitFor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine, type AgentActor } from '../../../machines/agent.machine.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../../src/stores/sqlite.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { deferred } from '../../support/deferred.js';
import { AWAITING_APPROVAL, WAIT_MS } from '../../support/hitl.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-queued-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const IDS = ['call_1_0', 'call_1_1', 'call_1_2'];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Long enough for a call handed over to start and be announced. */
const settle = () => sleep(50);

/** `lookup(key)`, each call held until the test releases it; `log` has each execute's start and each announcement, in order. */
function gatedLookup(needsApproval: boolean, budget?: { maxDurationMs: number; pause: 'duration'[] } | undefined) {
  const log: string[] = [];
  const gates = new Map(IDS.map((id) => [id, deferred()]));
  const running = new Map(IDS.map((id) => [id, deferred()]));
  const tool = defineTool({
    name: 'lookup',
    description: 'Looks a key up',
    input: z.object({ key: z.string() }),
    needsApproval,
    execute: async ({ key }, { toolCallId }) => {
      log.push(`execute ${toolCallId}`);
      running.get(toolCallId)!.resolve();
      await gates.get(toolCallId)!.promise;
      return `value of ${key}`;
    },
  });
  const machine = createAgentMachine({
    model: scriptedModel([{ text: 'looking', toolCalls: ['a', 'b', 'c'].map((key) => ({ name: 'lookup', args: { key } })) }, { text: 'done' }]),
    tools: [tool],
    toolConcurrency: 1,
    ...(budget && { budget }),
  });
  const listen = (actor: AgentActor) => actor.on('tool.started', (event) => log.push(`started ${event.call.id}`));
  const announced = () => log.filter((line) => line.startsWith('started ')).map((line) => line.slice('started '.length));
  const running_ = (id: string) => Promise.race([running.get(id)!.promise, sleep(WAIT_MS).then(() => Promise.reject(new Error(`${id} never started`)))]);
  return { machine, log, listen, announced, running: running_, release: (id: string) => gates.get(id)!.resolve() };
}

type Host = 'actor' | 'DurableSession';

/** Runs the three-call batch to its end on `host`, checking after each call starts that no queued call was announced. */
async function scenario(host: Host, approvals: boolean) {
  const lookup = gatedLookup(approvals);
  let actor: AgentActor;
  let outcome: () => Promise<unknown>;
  let end: () => Promise<void>;
  if (host === 'actor') {
    actor = createActor(lookup.machine, { input: { prompt: 'go' } });
    lookup.listen(actor);
    actor.start();
    outcome = async () => (await waitFor(actor, (s) => s.status === 'done', { timeout: WAIT_MS })).output?.outcome;
    end = async () => actor.stop();
  } else {
    const store = new SqliteSessionStore({ path: join(root, `${approvals ? 'approvals' : 'plain'}.db`) });
    const session = await DurableSession.open({ machine: lookup.machine, store, sessionId: 'queued', attach: lookup.listen });
    actor = session.actor;
    session.send({ type: 'input', message: 'go' });
    outcome = async () => (await session.whenIdle())?.outcome;
    end = async () => {
      await session.close();
      await store.close();
    };
  }
  try {
    if (approvals) {
      await waitFor(actor, (s) => s.matches(AWAITING_APPROVAL), { timeout: WAIT_MS });
      for (const id of IDS) actor.send({ type: 'approve', toolCallId: id });
    }
    const seen: string[][] = [];
    for (const id of IDS) {
      await lookup.running(id);
      await settle();
      seen.push(lookup.announced());
      lookup.release(id);
    }
    expect(await outcome()).toEqual({ type: 'Completed', finalText: 'done' });
    // While call k ran, the calls queued behind it had not been announced.
    expect(seen).toEqual([IDS.slice(0, 1), IDS.slice(0, 2), IDS]);
    // Each call announced once, just before its execute started.
    expect(lookup.log).toEqual(IDS.flatMap((id) => [`started ${id}`, `execute ${id}`]));
  } finally {
    await end();
  }
}

describe('a batch of three calls, toolConcurrency 1: each call is announced when it starts, not while queued', () => {
  for (const host of ['actor', 'DurableSession'] as const) {
    it(`${host}, no approvals`, async () => {
      await scenario(host, false);
    });
    it(`${host}, every call approved`, async () => {
      await scenario(host, true);
    });
  }
});

describe('a batch held by a pausing time limit, toolConcurrency 1', () => {
  const LIMIT_MS = 200;

  it('announces only the call that ran before the pause; the queued ones once each, as they start after the raise', async () => {
    const lookup = gatedLookup(false, { maxDurationMs: LIMIT_MS, pause: ['duration'] });
    const actor = createActor(lookup.machine, { input: { prompt: 'go' } });
    lookup.listen(actor);
    actor.start();
    try {
      await lookup.running('call_1_0');
      // Past the limit with call_1_0 in flight: the calls queued behind it are held.
      await sleep(LIMIT_MS + 100);
      lookup.release('call_1_0');
      await waitFor(actor, (s) => s.matches({ Running: 'BudgetPaused' }), { timeout: WAIT_MS });
      await settle();
      expect(lookup.announced()).toEqual(['call_1_0']);
      actor.send({ type: 'budget.raise', budget: { maxDurationMs: 60_000 } });
      for (const id of IDS.slice(1)) {
        await lookup.running(id);
        lookup.release(id);
      }
      const output = (await waitFor(actor, (s) => s.status === 'done', { timeout: WAIT_MS })).output!;
      expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
      expect(lookup.log).toEqual(IDS.flatMap((id) => [`started ${id}`, `execute ${id}`]));
    } finally {
      actor.stop();
    }
  });
});
