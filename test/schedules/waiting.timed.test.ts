/**
 * A scheduled run that stops to wait for someone (an approval, its subagent's, a budget raise) on a real SQLite
 * file: the tick ends there (`Waiting`, what it waits for in `lastError`), its session stored
 * where it is and its lease given back; the next ticks do not pile input onto the waiting run;
 * the answer is given later through a `DurableSession`, and the schedule goes on.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../machines/agent.machine.js';
import type { ApprovalRequest } from '../../src/agent/approvals/approval-binding.js';
import { agentTool } from '../../src/agent/subagents/agent-tool.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { listSchedules, schedule, startScheduler, type ScheduleTick } from '../../src/schedules.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import { SqliteSessionStore } from '../../src/stores/sqlite.js';
import type { SessionStore } from '../../src/stores/session-store.js';
import { defineTool } from '../../src/tools/define-tool.js';

const root = mkdtempSync(join(tmpdir(), 'loopchart-schedules-waiting-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** The first tick `ticks` holds that passes `check`, or undefined after `ms`: every wait is bounded. */
async function tickWhere(ticks: readonly ScheduleTick[], check: (tick: ScheduleTick) => boolean, ms = 8_000): Promise<ScheduleTick | undefined> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const found = ticks.find(check);
    if (found) return found;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return ticks.find(check);
}

const userMessages = async (store: SessionStore, session: string) => (await store.load(session))?.messages.filter((m) => m.role === 'user').length ?? 0;

describe('a scheduled run that waits for someone', () => {
  it('waits for an approval: the tick ends Waiting and lets the session go; the approval is given later, and the schedule goes on', async () => {
    const store = new SqliteSessionStore({ path: join(root, 'approval.db') });
    let refunded = 0;
    const refund = defineTool({ name: 'refund', description: 'refunds', input: z.object({ amount: z.number() }), needsApproval: true, execute: ({ amount }) => (refunded++, `refunded ${amount}`) });
    const machine = () =>
      createAgentMachine({
        model: scriptedModel([{ toolCalls: [{ id: 'r1', name: 'refund', args: { amount: 5 } }] }, { text: 'Refund done.' }, { text: 'Nothing to refund.' }]),
        tools: [refund],
      });
    const ticks: ScheduleTick[] = [];
    // The default run timeout (30 minutes): a tick that waited on the run would hold its lease that long.
    const scheduler = await startScheduler({ store, agents: { ops: machine() }, leaseMs: 1_000, onTick: (tick) => ticks.push(tick) });
    try {
      // Every 2 s: the checks right after the first tick are done long before the second claims it.
      await schedule(store, { id: 'refunds', session: 'ops', agent: 'ops', input: 'Do the refunds.', every: 2_000 });
      scheduler.wake();
      const first = await tickWhere(ticks, () => true);
      expect(first).toMatchObject({ outcome: 'Waiting', error: expect.stringMatching(/approval of call\(s\) r1/) });
      const [waiting] = await listSchedules(store);
      expect(waiting).toMatchObject({ lastOutcome: 'Waiting', runs: 1, firingBy: null });
      expect(scheduler.running()).toBe(0);
      // The next tick finds the run still waiting: skipped, its input not sent onto it.
      expect(await tickWhere(ticks, (tick) => tick.outcome === 'Skipped')).toMatchObject({ error: expect.stringMatching(/waits for an approval/) });
      expect(await userMessages(store, 'ops')).toBe(1);
      await scheduler.stop();

      // Later, a person approves through a DurableSession on the stored session: the run ends.
      let ask!: (request: ApprovalRequest) => void;
      const asked = new Promise<ApprovalRequest>((resolve) => (ask = resolve));
      const session = await DurableSession.open({ machine: machine(), store, sessionId: 'ops', attach: (actor) => void actor.on('approval.requested', (e) => ask(e.requests[0]!)) });
      await session.decide(await asked, { approved: true, by: 'ana' });
      // The script answers by the conversation's turn: this process goes on from the second reply.
      expect((await session.whenIdle())?.outcome).toEqual({ type: 'Completed', finalText: 'Refund done.' });
      await session.close();
      expect(refunded).toBe(1);
    } finally {
      // Bounded: a tick still on its run is let go.
      await scheduler.stop({ graceMs: 200 });
    }
    // The schedule goes on: the next tick sends its input to the session at rest.
    const again: ScheduleTick[] = [];
    const next = await startScheduler({ store, agents: { ops: machine() }, onTick: (tick) => again.push(tick) });
    try {
      expect(await tickWhere(again, () => true)).toMatchObject({ outcome: 'Completed', error: null });
      expect(await userMessages(store, 'ops')).toBe(2);
      expect((await store.load('ops'))!.messages.at(-1)!.content).toBe('Nothing to refund.');
    } finally {
      await next.stop();
      await store.close();
    }
  }, 30_000);

  it("whose subagent waits for an approval: the tick ends Waiting too; the approval is given later through the parent's session", async () => {
    const store = new SqliteSessionStore({ path: join(root, 'subagent.db') });
    let published = 0;
    const publish = defineTool({ name: 'publish', description: 'publishes', input: z.object({ text: z.string() }), needsApproval: true, execute: ({ text }) => (published++, `published: ${text}`) });
    const coordinator = () => {
      const writer = createAgentMachine({ model: scriptedModel([{ toolCalls: [{ id: 'p1', name: 'publish', args: { text: 'Tea at 4.' } }] }, { text: 'Published.' }]), tools: [publish] });
      return createAgentMachine({
        model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'writer', args: { task: 'Announce tea.' } }] }, { text: 'The writer published it.' }]),
        tools: [agentTool({ agent: writer, name: 'writer', description: 'Writes and publishes notes.' })],
      });
    };
    const ticks: ScheduleTick[] = [];
    const scheduler = await startScheduler({ store, agents: { coordinator: coordinator() }, leaseMs: 1_000, onTick: (tick) => ticks.push(tick) });
    try {
      await schedule(store, { id: 'tea', session: 'team', agent: 'coordinator', input: 'Tell everyone about tea.', at: Date.now() });
      scheduler.wake();
      expect(await tickWhere(ticks, () => true)).toMatchObject({ outcome: 'Waiting', error: expect.stringMatching(/subagent of call c1: the run waits for an approval of call\(s\) p1/) });
      expect((await listSchedules(store))[0]).toMatchObject({ lastOutcome: 'Waiting', runs: 1, firingBy: null });
    } finally {
      await scheduler.stop({ graceMs: 200 });
    }
    let ask!: (request: ApprovalRequest) => void;
    const asked = new Promise<ApprovalRequest>((resolve) => (ask = resolve));
    const session = await DurableSession.open({ machine: coordinator(), store, sessionId: 'team', attach: (actor) => void actor.on('approval.requested', (e) => ask(e.requests[0]!)) });
    try {
      const request = await asked;
      expect(request.toolCallId).toBe('c1/p1');
      await session.decide(request, { approved: true, by: 'ana' });
      expect((await session.whenIdle())?.outcome).toEqual({ type: 'Completed', finalText: 'The writer published it.' });
      expect(published).toBe(1);
    } finally {
      await session.close();
      await store.close();
    }
  }, 30_000);

  it('paused by its budget: the tick ends Waiting; a raise given later ends the run', async () => {
    const store = new SqliteSessionStore({ path: join(root, 'budget.db') });
    const look = defineTool({ name: 'look', description: 'looks', input: z.object({}), execute: () => 'looked' });
    const machine = () =>
      createAgentMachine({
        model: scriptedModel([{ toolCalls: [{ id: 'l1', name: 'look', args: {} }] }, { toolCalls: [{ id: 'l2', name: 'look', args: {} }] }, { text: 'Looked twice.' }]),
        tools: [look],
        budget: { maxToolCalls: 1, pause: true },
      });
    const ticks: ScheduleTick[] = [];
    const scheduler = await startScheduler({ store, agents: { looker: machine() }, leaseMs: 1_000, onTick: (tick) => ticks.push(tick) });
    try {
      await schedule(store, { id: 'looks', session: 'look', agent: 'looker', input: 'Look around.', at: Date.now() });
      scheduler.wake();
      expect(await tickWhere(ticks, () => true)).toMatchObject({ outcome: 'Waiting', error: expect.stringMatching(/budget/), nextAt: null });
      expect((await listSchedules(store))[0]).toMatchObject({ lastOutcome: 'Waiting', firingBy: null });
    } finally {
      // Bounded: a tick still on its run is let go.
      await scheduler.stop({ graceMs: 200 });
    }
    const session = await DurableSession.open({ machine: machine(), store, sessionId: 'look' });
    try {
      session.send({ type: 'budget.raise', budget: { maxToolCalls: 5 } });
      expect((await session.whenIdle())?.outcome.type).toBe('Completed');
    } finally {
      await session.close();
      await store.close();
    }
  }, 30_000);
});
