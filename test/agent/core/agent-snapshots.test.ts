/**
 * Issue 10, bug 4, the actor's door: `createActor(agent, { snapshot })` checks the persisted
 * context with the same validation as `LoopMachine.restore` and the store rows, plus the driver's
 * own fields. A tampered snapshot never runs: the actor is created in status `error` (XState
 * catches what restoring throws) with an InvalidSnapshotError that names the path, and an error
 * listener hears it on start.
 */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { InvalidSnapshotError } from '../../../src/errors.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { runInSession } from '../../support/driver.js';

const echo = defineTool({ name: 'echo', description: 'Echoes', input: z.object({ text: z.string() }), execute: ({ text }) => text });
const agent = createAgentMachine({ model: scriptedModel([{ toolCalls: [{ name: 'echo', args: { text: 'a' } }] }, { text: 'done' }]), tools: [echo] });

async function persistedAfterOneRun() {
  const actor = createActor(agent, { input: { sessionId: 's' } }).start();
  await runInSession(actor, 'go');
  const persisted = JSON.parse(JSON.stringify(actor.getPersistedSnapshot()));
  actor.stop();
  return persisted;
}

type Tamper = (snapshot: { context: { brain: { context: { history: unknown[] } }; policy: Record<string, unknown> } & Record<string, unknown> }) => void;

const TAMPERED: [string, Tamper, RegExp][] = [
  ['an orphan tool result', (s) => s.context.brain.context.history.push({ role: 'tool', toolCallId: 'ghost', toolName: 'echo', content: 'x' }), /context\.brain\.history\[\d+\]/],
  ['an unanswered call', (s) => s.context.brain.context.history.push({ role: 'assistant', content: '', toolCalls: [{ id: 'open', name: 'echo', args: {} }] }), /context\.brain/],
  ['contextWindow -1', (s) => (s.context.policy.contextWindow = -1), /context\.policy\.contextWindow/],
  ['a negative run index', (s) => (s.context.runIndex = -1), /context\.runIndex/],
  ['usage that is not a count', (s) => (s.context.sessionUsage = { inputTokens: 1.5, outputTokens: 0 }), /context\.sessionUsage/],
  ['a brain state that does not exist', (s) => ((s.context.brain as unknown as { value: string }).value = 'Dreaming'), /context\.brain/],
];

describe('a persisted agent snapshot from outside', () => {
  it.each(TAMPERED)('with %s is refused with InvalidSnapshotError naming the path', async (_, tamper, path) => {
    const snapshot = await persistedAfterOneRun();
    tamper(snapshot);
    let modelCalls = 0;
    const watched = createAgentMachine({ model: { name: 'm', generate: async () => (modelCalls++, { message: { role: 'assistant', content: 'x' }, finishReason: 'stop' }) } });
    const actor = createActor(watched, { snapshot });
    expect(actor.getSnapshot().status).toBe('error');
    const error = (actor.getSnapshot() as { error?: unknown }).error;
    expect(error).toBeInstanceOf(InvalidSnapshotError);
    expect((error as Error).message).toMatch(path);
    const heard: unknown[] = [];
    actor.subscribe({ error: (e) => heard.push(e) });
    actor.start();
    actor.send({ type: 'input', message: 'go' });
    await new Promise((r) => setTimeout(r, 10));
    expect(heard).toEqual([error]);
    expect(modelCalls).toBe(0);
  });

  it('untampered, it restores and runs on', async () => {
    const snapshot = await persistedAfterOneRun();
    const actor = createActor(agent, { snapshot }).start();
    expect(actor.getSnapshot().value).toBe('Idle');
    expect(actor.getSnapshot().context.brain.context.history).toHaveLength(4);
    actor.stop();
  });
});

describe('a stored state given as input', () => {
  it('is checked like a persisted snapshot: a tampered one leaves the actor in error, nothing runs', async () => {
    const snapshot = await persistedAfterOneRun();
    snapshot.context.brain.context.history.push({ role: 'tool', toolCallId: 'ghost', toolName: 'echo', content: 'x' });
    const actor = createActor(agent, { input: { stored: snapshot.context as never } });
    expect(actor.getSnapshot().status).toBe('error');
    expect((actor.getSnapshot() as { error?: unknown }).error).toBeInstanceOf(InvalidSnapshotError);
  });
});
