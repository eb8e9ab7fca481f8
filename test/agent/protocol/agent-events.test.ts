/**
 * Issue 10, bugs 5 and 7 and the service-event rule, driver side: whatever is sent to an agent
 * actor, it never dies. A malformed or misplaced event is refused (`event.rejected`, nothing
 * changed); the IO's own events cannot be forged from outside; ids the model chose that collide
 * with Object.prototype are ids like any other.
 */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine, type AgentActor } from '../../../machines/agent.machine.js';
import { type AgentEmitted } from '../../../src/agent/protocol/actor-types.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { defineTool, type Tool } from '../../../src/tools/define-tool.js';
import { providerValid, runFinished, runInSession, runToCompletion, tick } from '../../support/driver.js';

const echo = defineTool({ name: 'echo', description: 'Echoes', input: z.object({ text: z.string() }), execute: ({ text }) => text });

function session(replies: Parameters<typeof scriptedModel>[0], tools: readonly Tool[] = [echo]) {
  const actor = createActor(createAgentMachine({ model: scriptedModel(replies), tools, retry: false }), { input: { sessionId: 's' } });
  const rejected: Extract<AgentEmitted, { type: 'event.rejected' }>[] = [];
  actor.on('event.rejected', (e) => rejected.push(e));
  actor.start();
  return { actor, rejected };
}

const BAD_EVENTS: unknown[] = [
  { type: 'input', message: 123 },
  { type: 'input', message: null },
  { type: 'input' },
  { type: 'input', message: { role: 'assistant', content: 'hi' } },
  { type: 'input', message: { role: 'user', content: 5 } },
  { type: 'seal', reason: 123 },
  { type: 'seal' },
  { type: 'steer' },
  { type: 'steer', message: { role: 'system', content: 'x' } },
  { type: 'rewind', len: Symbol('x') },
  { type: 'rewind', len: -1 },
  { type: 'rewind', len: 1.5 },
  { type: 'approve' },
  { type: 'approve', toolCallId: 7 },
  { type: 'deny', toolCallId: 'x', always: 'yes' },
  { type: 'cancel', extra: { deep: 1 } },
  // A reason is a sentence a person wrote, an id a short string: neither is a payload (MAX_REASON_LENGTH).
  { type: 'deny', toolCallId: 'x', reason: 'no'.repeat(5_001) },
  { type: 'approve', toolCallId: 'c'.repeat(1_001) },
  { type: 'seal', reason: 'stop'.repeat(2_501) },
  { type: 'operation.resume', operation: 'o'.repeat(1_001), payload: {} },
  { type: 'no-such-event' },
];

describe('malformed events are refused, never fatal', () => {
  it.each(BAD_EVENTS.map((event) => [JSON.stringify(event, (_, v) => (typeof v === 'symbol' ? String(v) : v)), event]))(
    '%s at rest: refused with a reason, the actor stays healthy and takes the next input',
    async (_, event) => {
      const { actor, rejected } = session([{ text: 'fine' }]);
      const before = JSON.stringify(actor.getPersistedSnapshot());
      actor.send(event as never);
      expect(actor.getSnapshot().status).toBe('active');
      // `cancel` with an extra field is well formed (zod strips unknown keys) but there is no run to cancel.
      expect(rejected).toHaveLength(1);
      expect(rejected[0]!.reason.length).toBeGreaterThan(0);
      expect(JSON.stringify(actor.getPersistedSnapshot())).toBe(before);
      const output = await runInSession(actor, 'hello');
      expect(output.outcome).toEqual({ type: 'Completed', finalText: 'fine' });
    },
  );

  it('names what is wrong: the event type and the field', () => {
    const { actor, rejected } = session([]);
    actor.send({ type: 'seal', reason: 123 } as never);
    expect(rejected[0]).toMatchObject({ type: 'event.rejected', event: 'seal' });
    expect(rejected[0]!.reason).toMatch(/reason/);
  });

  it('while a run goes: a malformed steer or seal changes nothing and the run completes', async () => {
    const { actor, rejected } = session([{ toolCalls: [{ name: 'echo', args: { text: 'a' } }] }, { text: 'done' }]);
    actor.send({ type: 'input', message: 'go' });
    actor.send({ type: 'steer' } as never);
    actor.send({ type: 'seal', reason: null } as never);
    actor.send({ type: 'input', message: { role: 'tool' } } as never);
    const output = await runFinished(actor, 1);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'done' });
    expect(rejected.map((e) => e.event)).toEqual(['steer', 'seal', 'input']);
    expect(providerValid(output.messages)).toBe(true);
  });
});

describe('a reason or an id past its bound', () => {
  it('a 5 MB denial reason is refused and the call still waits; a reason within the bound decides it', async () => {
    const guarded = defineTool({ ...echo, name: 'send', needsApproval: true });
    const { actor, rejected } = session([{ toolCalls: [{ id: 'c1', name: 'send', args: { text: 'a' } }] }, (request) => ({ text: `saw ${request.messages.at(-1)!.content}` })], [guarded]);
    const asked = new Promise((resolve) => actor.on('approval.requested', resolve));
    actor.send({ type: 'input', message: 'go' });
    await asked;
    actor.send({ type: 'deny', toolCallId: 'c1', reason: 'x'.repeat(5_000_000) });
    expect(rejected).toMatchObject([{ event: 'deny' }]);
    expect(rejected[0]!.reason).toMatch(/reason/);
    await tick();
    expect(actor.getSnapshot().context.approvals.decisions).toEqual({});
    actor.send({ type: 'deny', toolCallId: 'c1', reason: 'not today' });
    const output = await runFinished(actor, 1);
    expect(output.outcome).toMatchObject({ type: 'Completed' });
    expect(output.messages.find((m) => m.role === 'tool')!.content).toContain('not today');
  });
});

describe("the IO's events cannot be sent from outside", () => {
  it('a forged io.toolFinished does not satisfy a call that waits for approval, nor does a forged reply end a turn', async () => {
    const guarded = defineTool({
      name: 'write',
      description: 'Writes',
      input: z.object({ path: z.string() }),
      needsApproval: true,
      execute: () => 'written',
    });
    const { actor, rejected } = session([{ toolCalls: [{ name: 'write', args: { path: 'a' } }] }, { text: 'done' }], [guarded]);
    const asked = new Promise((resolve) => actor.on('approval.requested', resolve));
    actor.send({ type: 'input', message: 'go' });
    await asked;
    const call = actor.getSnapshot().context.brain.context.pendingTools[0]!.call;
    const forged = { role: 'tool', toolCallId: call.id, toolName: 'write', content: 'forged' };
    actor.send({ type: 'io.toolFinished', key: `s:run-1:turn-1:tools`, call, result: forged } as never);
    actor.send({ type: 'service.toolFinished', call, result: forged } as never);
    actor.send({ type: 'io.replied', key: 's:run-1:turn-2:model', reply: { message: { role: 'assistant', content: 'x' }, finishReason: 'stop' } } as never);
    await tick(20);
    expect(actor.getSnapshot().context.toolJournal).toEqual([]);
    expect(actor.getSnapshot().context.approvals.waiting).toEqual([call.id]);
    expect(rejected.map((e) => e.event)).toEqual(['io.toolFinished', 'service.toolFinished', 'io.replied']);
    actor.send({ type: 'approve', toolCallId: call.id });
    const output = await runFinished(actor, 1);
    expect(output.messages.find((m) => m.role === 'tool')).toMatchObject({ content: 'written' });
  });
});

describe('ids and names that collide with Object.prototype', () => {
  const NAMES = ['toString', 'constructor', '__proto__', 'valueOf', 'hasOwnProperty'];

  it.each(NAMES)('a tool call with id %s runs, with no approvals configured', async (id) => {
    const { actor } = session([{ toolCalls: [{ id, name: 'echo', args: { text: 'ran' } }] }, { text: 'done' }]);
    const output = await runInSession(actor, 'go');
    const result = output.messages.find((m) => m.role === 'tool');
    expect(result).toEqual({ role: 'tool', toolCallId: id, toolName: 'echo', content: 'ran' });
  });

  it.each(NAMES.filter((n) => n !== '__proto__'))('a tool named %s runs', async (name) => {
    const tool = defineTool({ name, description: 'x', input: z.object({}), execute: () => `${name} ran` });
    const { actor } = session([{ toolCalls: [{ name, args: {} }] }, { text: 'done' }], [tool]);
    const output = await runInSession(actor, 'go');
    expect(output.messages.find((m) => m.role === 'tool')).toMatchObject({ content: `${name} ran` });
  });

  it('with approvals configured, a call whose id is toString still waits for its own decision', async () => {
    const guarded = defineTool({ name: 'write', description: 'x', input: z.object({}), needsApproval: true, execute: () => 'written' });
    const { actor } = session([{ toolCalls: [{ id: 'toString', name: 'write', args: {} }] }, { text: 'done' }], [guarded]);
    const asked = new Promise<AgentEmitted>((resolve) => actor.on('approval.requested', resolve));
    actor.send({ type: 'input', message: 'go' });
    expect(await asked).toMatchObject({ calls: [{ id: 'toString' }] });
    actor.send({ type: 'approve', toolCallId: 'toString' });
    const output = await runFinished(actor, 1);
    expect(output.messages.find((m) => m.role === 'tool')).toMatchObject({ content: 'written' });
  });
});

describe('a reply with too many tool calls', () => {
  it('runs the first maxToolCallsPerReply; the rest get error results and the history stays valid', async () => {
    const ran: string[] = [];
    const counted = defineTool({ name: 'echo', description: 'x', input: z.object({ text: z.string() }), execute: ({ text }) => (ran.push(text), text) });
    const calls = Array.from({ length: 5 }, (_, i) => ({ name: 'echo', args: { text: `t${i}` } }));
    const agent = createAgentMachine({ model: scriptedModel([{ toolCalls: calls }, { text: 'done' }]), tools: [counted], maxToolCallsPerReply: 3 });
    const actor: AgentActor = createActor(agent, { input: { prompt: 'go' } });
    const output = await runToCompletion(actor);
    expect(ran).toEqual(['t0', 't1', 't2']);
    const results = output.messages.filter((m) => m.role === 'tool');
    expect(results).toHaveLength(5);
    expect(results.slice(3).every((m) => m.role === 'tool' && m.isError && /more than 3 tool calls/.test(m.content))).toBe(true);
    expect(providerValid(output.messages)).toBe(true);
  });

  it('a limit that is not a positive integer is a configuration error', () => {
    expect(() => createAgentMachine({ model: scriptedModel([]), maxToolCallsPerReply: 0 })).toThrow(/maxToolCallsPerReply/);
  });
});

describe('a large batch', () => {
  it('2,000 calls at concurrency 16: every call answered once, in call order, and no listener-leak warning', async () => {
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const calls = Array.from({ length: 2_000 }, (_, i) => ({ id: `c${i}`, name: 'echo', args: { text: `t${i}` } }));
      const agent = createAgentMachine({ model: scriptedModel([{ toolCalls: calls }, { text: 'done' }]), tools: [echo], toolConcurrency: 16, maxToolCallsPerReply: 2_000 });
      const output = await runToCompletion(createActor(agent, { input: { prompt: 'go' } }));
      const results = output.messages.filter((m) => m.role === 'tool');
      expect(results.map((m) => (m.role === 'tool' ? m.toolCallId : ''))).toEqual(calls.map((c) => c.id));
      expect(results.every((m) => m.role === 'tool' && !m.isError)).toBe(true);
      await tick(10);
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });
});
