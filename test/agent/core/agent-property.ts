/**
 * Issue 10, the line held by a property: random sequences mixing valid, malformed, misplaced and
 * forged events sent to an agent actor (with a model that calls tools, unknown tools and tools
 * that need approval). After every event: the actor is not in `error`, its persisted snapshot
 * restores in a new actor, and its history is provider-valid.
 *
 * Run by agent-property.test.ts (100 sequences, `test:fast`) and agent-property.slow.test.ts
 * (1,000, the size CI holds the line at; `LOOPCHART_FUZZ_RUNS=20000 npx vitest run
 * test/agent/core/agent-property.slow.test.ts` is the nightly-size run).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine, type AgentActor } from '../../../machines/agent.machine.js';
import type { Model, ModelReply } from '../../../src/model.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { providerValid } from '../../support/driver.js';

const echo = defineTool({ name: 'echo', description: 'Echoes', input: z.object({ text: z.string() }), execute: ({ text }) => text });
const guarded = defineTool({
  name: 'write',
  description: 'Writes',
  input: z.object({ path: z.string() }),
  needsApproval: true,
  execute: ({ path }) => `wrote ${path}`,
});

/** Answers by the shape of the conversation, so any process gets the same reply for the same request. */
const model: Model = {
  name: 'fuzz',
  async generate({ messages }): Promise<ModelReply> {
    const n = messages.filter((m) => m.role === 'assistant').length;
    const toolCalls = [
      [{ id: `e${n}`, name: 'echo', args: { text: `t${n}` } }],
      [{ id: `w${n}`, name: 'write', args: { path: `p${n}` } }, { id: 'toString', name: 'echo', args: { text: 'x' } }],
      [{ id: `u${n}`, name: 'nope', args: {} }],
      [{ id: `b${n}`, name: 'echo', args: { text: 5 } }],
    ][n % 5];
    return toolCalls
      ? { message: { role: 'assistant', content: '', toolCalls }, finishReason: 'tool-calls', usage: { inputTokens: 10 * n, outputTokens: 1 } }
      : { message: { role: 'assistant', content: `answer ${n}` }, finishReason: 'stop' };
  },
};

const agent = createAgentMachine({ model, tools: [echo, guarded], retry: false, policy: { maxTurns: 6 } });

/** One event, valid or not, chosen by `pick` and shaped by what the actor waits for now. */
function eventFor(actor: AgentActor, pick: number, n: number): unknown {
  const waiting = actor.getSnapshot().context.approvals.waiting;
  const id = waiting[n % Math.max(1, waiting.length)] ?? `x${n}`;
  const events: unknown[] = [
    { type: 'input', message: `hello ${n}` },
    { type: 'input', message: { role: 'user', content: 'structured' } },
    { type: 'input', message: n % 2 ? null : 123 },
    { type: 'steer', message: 'steer' },
    { type: 'steer' },
    { type: 'cancel' },
    { type: 'seal', reason: n % 2 ? 'enough' : 42 },
    { type: 'policy', policy: { maxTurns: n % 4 } },
    { type: 'policy', policy: { contextWindow: -1 } },
    { type: 'approve', toolCallId: id, ...(n % 3 === 0 && { always: true }) },
    { type: 'deny', toolCallId: id, reason: 'no' },
    { type: 'approve', toolCallId: 7 },
    { type: 'rewind', len: n % 5 },
    { type: 'rewind', len: -n - 1 },
    { type: 'resume' },
    { type: 'io.toolFinished', key: 'k', call: { id, name: 'write', args: {} }, result: { role: 'tool', toolCallId: id, toolName: 'write', content: 'forged' } },
    { type: 'io.replied', key: 'k', reply: { message: { role: 'assistant', content: 'forged' }, finishReason: 'stop' } },
    { type: 'service.toolFinished' },
    { type: `whatever-${n}` },
    { type: 'xstate.stop' },
  ];
  return events[pick % events.length];
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

/** The property over `runs` random sequences, as a describe block. */
export function describeAgentProperty(runs: number): void {
  describe('random event sequences against the agent actor', () => {
    it(`never kill it, never lose restorability or provider validity (${runs} sequences)`, async () => {
      let events = 0;
      await fc.assert(
        fc.asyncProperty(fc.array(fc.tuple(fc.nat(1_000), fc.nat(1_000)), { minLength: 1, maxLength: 12 }), async (steps) => {
          const actor = createActor(agent, { input: { sessionId: 'fuzz' } }).start();
          try {
            for (const [pick, n] of steps) {
              actor.send(eventFor(actor, pick, n) as never);
              events++;
              await settle();
              const snapshot = actor.getSnapshot();
              expect(snapshot.status).not.toBe('error');
              const persisted = JSON.parse(JSON.stringify(actor.getPersistedSnapshot()));
              expect(() => createActor(agent, { snapshot: persisted })).not.toThrow();
              expect(providerValid(snapshot.context.brain.context.history)).toBe(true);
            }
          } finally {
            actor.stop();
          }
        }),
        { numRuns: runs },
      );
      expect(events).toBeGreaterThan(runs);
    }, 120_000);
  });
}
