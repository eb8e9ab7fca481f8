/**
 * runAgent and streamAgent hold their run's only handle, so a run that waits for someone must
 * get its answer from them or it waits forever: a call that needs approval is put to `approve`
 * (denied, with the reason, without one, on a throw, a bad answer or a timeout), and a run an
 * operation yielded, or a budget paused, is sealed with a reason that says what to use instead.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { agentTool, createAgentMachine, defineTool, InvalidConfigError, runAgent, streamAgent, type ApprovalRequest, type Operation, type ToolMessage } from '../../../src/index.js';
import { scriptedModel } from '../../../src/testing.js';
import { NO_APPROVER_REASON } from '../../../src/agent/hosts/unattended.js';

/** A run that asks for `rm` (which needs approval), then answers; `runs` counts the side effect. */
function deleting() {
  const effects = { runs: 0 };
  const rm = defineTool({
    name: 'rm',
    description: 'Deletes a file.',
    input: z.object({ path: z.string() }),
    needsApproval: true,
    execute: ({ path }) => {
      effects.runs++;
      return `deleted ${path}`;
    },
  });
  const model = scriptedModel([{ toolCalls: [{ name: 'rm', args: { path: 'a.txt' } }] }, { text: 'done' }]);
  return { effects, options: { model, tools: [rm], prompt: 'Delete a.txt.' } };
}

const toolResult = (messages: readonly { role: string }[]) => messages.find((message): message is ToolMessage => message.role === 'tool')!;

/** Settles within `ms` or fails the test: the point is that nothing waits forever. */
async function within<T>(ms: number, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([promise, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`still waiting after ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

describe('runAgent answers the waits only it can answer', () => {
  it('without approve, a call that needs approval is denied with the reason, and the run goes on to its answer', async () => {
    const { effects, options } = deleting();
    const result = await within(5_000, runAgent(options));
    expect(result.outcome).toMatchObject({ type: 'Completed', finalText: 'done' });
    expect(effects.runs).toBe(0);
    expect(toolResult(result.messages)).toMatchObject({ toolName: 'rm', isError: true });
    expect(toolResult(result.messages).content).toContain(NO_APPROVER_REASON);
  });

  it('approve sees the request as shown and decides it: true runs the tool', async () => {
    const { effects, options } = deleting();
    const seen: ApprovalRequest[] = [];
    const result = await within(5_000, runAgent({ ...options, approve: (request) => (seen.push(request), true) }));
    expect(seen).toEqual([expect.objectContaining({ toolName: 'rm', args: { path: 'a.txt' }, run: 1, digest: expect.stringMatching(/^[0-9a-f]{64}$/) })]);
    expect(effects.runs).toBe(1);
    expect(toolResult(result.messages).content).toBe('deleted a.txt');
  });

  it('an async verdict with a reason denies the call, and the model reads the reason', async () => {
    const { effects, options } = deleting();
    const result = await within(5_000, runAgent({ ...options, approve: async () => ({ approved: false, reason: 'Not on Fridays.' }) }));
    expect(effects.runs).toBe(0);
    expect(toolResult(result.messages)).toMatchObject({ isError: true, content: expect.stringContaining('Not on Fridays.') });
  });

  it.each([
    ['throws', () => {
      throw new Error('the approver is down');
    }, 'the approve function failed: the approver is down'],
    ['answers something else', () => 'yes' as never, 'the approve function answered string'],
    ['never answers (approveTimeoutMs)', () => new Promise<never>(() => {}), 'no decision within 50 ms'],
  ])('an approve function that %s denies the call (fail closed), with the reason', async (_, approve, reason) => {
    const { effects, options } = deleting();
    const result = await within(5_000, runAgent({ ...options, approve, approveTimeoutMs: 50 }));
    expect(result.outcome.type).toBe('Completed');
    expect(effects.runs).toBe(0);
    expect(toolResult(result.messages).content).toContain(reason);
  });

  it("approve's signal aborts when its decision times out", async () => {
    const { options } = deleting();
    let signal: AbortSignal | undefined;
    await within(5_000, runAgent({ ...options, approveTimeoutMs: 30, approve: (_, options) => ((signal = options.signal), new Promise(() => {})) }));
    expect(signal?.aborted).toBe(true);
  });

  it("a subagent's call that needs approval reaches approve under its path, once, and only the approved call runs", async () => {
    const published: string[] = [];
    const publish = defineTool({
      name: 'publish',
      description: 'Publishes a note.',
      input: z.object({ text: z.string() }),
      needsApproval: true,
      execute: ({ text }) => (published.push(text), 'published'),
    });
    const writer = createAgentMachine({
      model: scriptedModel([{ toolCalls: [{ id: 'p1', name: 'publish', args: { text: 'Tea.' } }, { id: 'p2', name: 'publish', args: { text: 'Cake.' } }] }, { text: 'Published one.' }]),
      tools: [publish],
    });
    const asked: string[] = [];
    const result = await within(5_000, runAgent({
      model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'writer', args: { task: 'Announce.' } }] }, { text: 'Done.' }]),
      tools: [agentTool({ agent: writer, name: 'writer', description: 'Writes notes.' })],
      prompt: 'Tell everyone.',
      approve: async (request) => (asked.push(request.toolCallId), request.toolCallId === 'c1/p1'),
    }));
    expect(result.outcome.type).toBe('Completed');
    expect(asked).toEqual(['c1/p1', 'c1/p2']);
    expect(published).toEqual(['Tea.']);
  });

  it('a run cancelled while approve is pending ends at once, and nothing of it stays behind (its signal aborts, no timer)', async () => {
    const { effects, options } = deleting();
    const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
    const before = timers();
    const stop = new AbortController();
    let signal: AbortSignal | undefined;
    const result = await within(5_000, runAgent({ ...options, signal: stop.signal, approve: (_, options) => ((signal = options.signal), stop.abort(), new Promise(() => {})) }));
    expect(result.outcome.type).toBe('Cancelled');
    expect(effects.runs).toBe(0);
    expect(signal?.aborted).toBe(true);
    expect(timers()).toBe(before);
  });

  it('streamAgent streams the request and its decision, then the tool', async () => {
    const { effects, options } = deleting();
    const types: string[] = [];
    for await (const event of streamAgent({ ...options, approve: () => true })) types.push(event.type);
    expect(effects.runs).toBe(1);
    expect(types.indexOf('approval.requested')).toBeGreaterThan(-1);
    expect(types.indexOf('approval.decided')).toBeGreaterThan(types.indexOf('approval.requested'));
    expect(types.indexOf('tool.started')).toBeGreaterThan(types.indexOf('approval.decided'));
    expect(types.at(-1)).toBe('done');
  });

  it('a run an operation yielded is sealed, naming the operation and what to use instead', async () => {
    const gate: Operation = { name: 'gate', resume: { schema: z.object({ ok: z.boolean() }) }, beforeModelCall: () => ({ yield: { reason: 'review' } }) };
    const result = await within(5_000, runAgent({ model: scriptedModel([{ text: 'never asked' }]), operations: [gate], prompt: 'hi' }));
    expect(result.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringContaining("the 'gate' operation yielded (review)") });
    expect(result.outcome.type === 'Sealed' && result.outcome.reason).toContain('DurableSession');
  });

  it('a run a budget paused is sealed (nobody can raise it)', async () => {
    const { options } = deleting();
    const result = await within(5_000, runAgent({ ...options, approve: () => true, budget: { maxToolCalls: 1, pause: true }, model: scriptedModel([
      { toolCalls: [{ name: 'rm', args: { path: 'a.txt' } }] },
      { toolCalls: [{ name: 'rm', args: { path: 'b.txt' } }] },
      { text: 'done' },
    ]) }));
    expect(result.outcome).toMatchObject({ type: 'Sealed', reason: expect.stringContaining("the 'budget' operation yielded") });
  });

  it('a bad approve or approveTimeoutMs is a configuration error', async () => {
    const { options } = deleting();
    await expect(runAgent({ ...options, approve: 42 as never })).rejects.toSatisfy((error) => InvalidConfigError.isInstance(error));
    await expect(runAgent({ ...options, approveTimeoutMs: 0 })).rejects.toThrow(/approveTimeoutMs must be a positive number/);
  });
});
