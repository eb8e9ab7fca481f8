/**
 * Pausing on a provider's usage limit (issue 26, item 3): with `pauseOnUsageLimit`, a model call
 * that finally fails with a 429 carrying a retry time within the bound waits in
 * `Running.BudgetPaused` with the time to resume stored, then makes the same call again by itself.
 * Against the local Chat Completions server, with the model's own retries at 0.
 */
import { describe, expect, it } from 'vitest';
import { createActor, waitFor } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { type AgentEmitted } from '../../../src/agent/protocol/actor-types.js';
import { InvalidConfigError } from '../../../src/errors.js';
import { DEFAULT_USAGE_LIMIT_MAX_WAIT_MS, limitLifted, limitedUntil, resumeDelay, usageLimitRule, usageLimitWait } from '../../../src/agent/budget/usage-limit.js';
import { ModelError } from '../../../src/model.js';
import { openAICompatibleModel } from '../../../src/models/openai-compatible.js';
import { TEST_MODEL, useChatServer } from '../../support/chat-server.js';
import { runToCompletion, WAIT_MS } from '../../support/driver.js';

const server = useChatServer();
const PAUSED = { Running: 'BudgetPaused' } as const;
const limited = (ms: string) => ({ type: 'error' as const, status: 429, headers: { 'retry-after-ms': ms }, body: { error: { message: 'Usage limit reached' } } });
const model = () => openAICompatibleModel({ baseURL: server.baseURL, apiKey: 'sk-test', model: TEST_MODEL });
const agent = (pauseOnUsageLimit?: boolean | { maxWaitMs?: number }) => createAgentMachine({ model: model(), retry: false, ...(pauseOnUsageLimit !== undefined && { pauseOnUsageLimit }) });

describe('usage-limit rules', () => {
  it('is off unless asked, and checks its option at config time', () => {
    expect(usageLimitRule(undefined)).toBeNull();
    expect(usageLimitRule(false)).toBeNull();
    expect(usageLimitRule(true)).toEqual({ maxWaitMs: DEFAULT_USAGE_LIMIT_MAX_WAIT_MS });
    expect(usageLimitRule({ maxWaitMs: 500 })).toEqual({ maxWaitMs: 500 });
    for (const bad of [{ maxWaitMs: -1 }, { maxWaitMs: 2 ** 31 }, { wait: 5 }, 'yes']) expect(() => usageLimitRule(bad)).toThrow(InvalidConfigError);
    expect(() => createAgentMachine({ model: model(), pauseOnUsageLimit: { maxWaitMs: 0 } })).toThrow(InvalidConfigError);
  });

  it('waits only for a 429 that names a retry time within the bound', () => {
    const rule = { maxWaitMs: 1000 };
    const error = (status: number, retryAfterMs?: number) => new ModelError('limit', { status, retryable: true, ...(retryAfterMs !== undefined && { retryAfterMs }) });
    expect(usageLimitWait(rule, error(429, 300))).toBe(300);
    expect(usageLimitWait(rule, error(429, 1000))).toBe(1000);
    expect(usageLimitWait(rule, error(429, 1001))).toBeNull();
    expect(usageLimitWait(rule, error(429))).toBeNull();
    expect(usageLimitWait(rule, error(503, 300))).toBeNull();
    expect(usageLimitWait(null, error(429, 300))).toBeNull();
    expect(usageLimitWait(rule, new Error('429'))).toBeNull();
  });

  it('stores the time to resume, and banks the paused time when the run goes on', () => {
    const pause = limitedUntil(undefined, { message: 'Usage limit reached' }, 300, 1000);
    expect(pause.usageLimit?.resumeAt).toBe(1300);
    expect(pause.usageLimit?.reason).toMatch(/provider's usage limit/);
    expect(resumeDelay(pause, 1100)).toBe(200);
    expect(resumeDelay(pause, 5000)).toBe(0);
    expect(limitLifted({ ...pause, pausedAt: 1000 }, 1300)).toEqual({ raised: {}, pausedAt: null, pausedMs: 300 });
  });
});

describe('pauseOnUsageLimit against the local server', () => {
  it('pauses on a 429 with retry-after-ms, then completes by itself with the same call', async () => {
    server.enqueue(limited('300'), { type: 'reply', text: ['after the limit'] });
    const actor = createActor(agent(true), { input: { prompt: 'hi' } });
    const yielded: AgentEmitted[] = [];
    actor.on('operation.yielded', (event) => void yielded.push(event));
    const before = Date.now();
    actor.start();
    const paused = await waitFor(actor, (s) => s.matches(PAUSED), { timeout: WAIT_MS });
    const resumeAt = paused.context.budgetPause!.usageLimit!.resumeAt;
    expect(resumeAt).toBeGreaterThanOrEqual(before + 300);
    expect(yielded).toEqual([expect.objectContaining({ operation: 'budget', payload: { resumeAt } })]);
    const output = await runToCompletion(actor);
    expect(Date.now()).toBeGreaterThanOrEqual(resumeAt);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'after the limit' });
    expect(server.requests).toHaveLength(2);
  });

  it('off by default: the run fails as before', async () => {
    server.enqueue(limited('300'));
    const output = await runToCompletion(createActor(agent(), { input: { prompt: 'hi' } }));
    expect(output.outcome.type).toBe('Failed');
    expect(server.requests).toHaveLength(1);
  });

  it('a retry time over the bound fails as before', async () => {
    server.enqueue(limited('5000'));
    const output = await runToCompletion(createActor(agent({ maxWaitMs: 1000 }), { input: { prompt: 'hi' } }));
    expect(output.outcome.type).toBe('Failed');
    expect(server.requests).toHaveLength(1);
  });

  it('a raise resumes at once, a seal ends the wait', async () => {
    server.enqueue(limited('60000'), { type: 'reply', text: ['raised'] });
    const raised = createActor(agent(true), { input: { prompt: 'hi' } }).start();
    await waitFor(raised, (s) => s.matches(PAUSED), { timeout: WAIT_MS });
    raised.send({ type: 'budget.raise', budget: {} });
    expect((await runToCompletion(raised)).outcome).toEqual({ type: 'Completed', finalText: 'raised' });

    server.enqueue(limited('60000'));
    const sealed = createActor(agent(true), { input: { prompt: 'hi' } }).start();
    await waitFor(sealed, (s) => s.matches(PAUSED), { timeout: WAIT_MS });
    sealed.send({ type: 'seal', reason: 'enough' });
    expect((await runToCompletion(sealed)).outcome).toEqual({ type: 'Sealed', reason: 'enough' });
  });

  it('the call resumed after the pause is the call decided before it: a policy changed meanwhile applies from the next decision', async () => {
    server.enqueue(limited('60000'), { type: 'reply', text: ['the same call'] });
    const actor = createActor(agent(true), { input: { prompt: 'hi' } }).start();
    await waitFor(actor, (s) => s.matches(PAUSED), { timeout: WAIT_MS });
    // Were the brain's step taken again on the way back into the call, this turn limit would end
    // the run there, with the call already on its way.
    actor.send({ type: 'policy', policy: { maxTurns: 0 } });
    actor.send({ type: 'budget.raise', budget: {} });
    expect((await runToCompletion(actor)).outcome).toEqual({ type: 'Completed', finalText: 'the same call' });
    expect(server.requests).toHaveLength(2);
  });

  it('resumes no earlier than the stored time by the run\'s clock, though the timer fires before it', async () => {
    server.enqueue(limited('300'), { type: 'reply', text: ['on time'] });
    let offset = 0;
    const clock = () => Date.now() + offset;
    const actor = createActor(createAgentMachine({ model: model(), retry: false, pauseOnUsageLimit: true, clock }), { input: { prompt: 'hi' } }).start();
    await waitFor(actor, (s) => s.matches(PAUSED), { timeout: WAIT_MS });
    const resumeAt = actor.getSnapshot().context.budgetPause!.usageLimit!.resumeAt;
    // The wall clock steps back 200 ms (NTP): the timer, on the monotonic clock, fires first.
    offset = -200;
    let resumedAt = 0;
    actor.subscribe((s) => void (resumedAt ||= s.matches({ Running: 'AwaitingModel' }) ? clock() : 0));
    expect((await runToCompletion(actor)).outcome).toEqual({ type: 'Completed', finalText: 'on time' });
    expect(resumedAt).toBeGreaterThanOrEqual(resumeAt);
    expect(server.requests).toHaveLength(2);
  });

  it('a restored snapshot waiting in the pause resumes at the stored time', async () => {
    server.enqueue(limited('400'), { type: 'reply', text: ['restored'] });
    const machine = agent(true);
    const first = createActor(machine, { input: { prompt: 'hi' } }).start();
    await waitFor(first, (s) => s.matches(PAUSED), { timeout: WAIT_MS });
    const stored = JSON.parse(JSON.stringify(first.getPersistedSnapshot()));
    first.stop();
    const resumeAt = stored.context.budgetPause.usageLimit.resumeAt as number;
    const restored = createActor(machine, { snapshot: stored });
    let resumedAt = 0;
    restored.subscribe((s) => void (resumedAt ||= s.matches({ Running: 'AwaitingModel' }) ? Date.now() : 0));
    const output = await runToCompletion(restored);
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'restored' });
    expect(resumedAt).toBeGreaterThanOrEqual(resumeAt);
    expect(server.requests).toHaveLength(2);
  });

  it('a restored snapshot whose time is past resumes at once', async () => {
    server.enqueue(limited('60000'), { type: 'reply', text: ['late'] });
    const machine = agent(true);
    const first = createActor(machine, { input: { prompt: 'hi' } }).start();
    await waitFor(first, (s) => s.matches(PAUSED), { timeout: WAIT_MS });
    const stored = JSON.parse(JSON.stringify(first.getPersistedSnapshot()));
    first.stop();
    stored.context.budgetPause.usageLimit.resumeAt = Date.now() - 1;
    const output = await runToCompletion(createActor(machine, { snapshot: stored }));
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'late' });
  });
});
