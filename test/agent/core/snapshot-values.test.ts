/**
 * Snapshots are values (issue 19): nothing reachable from an emitted or a persisted snapshot
 * changes afterwards. A multi-run session with tools, an approval, compaction and a rewind; every
 * snapshot is copied on receipt and compared with itself at the end.
 */
import { describe, expect, it } from 'vitest';
import { createActor, waitFor } from 'xstate';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import type { Compactor } from '../../../src/compaction/contract.js';
import type { Model } from '../../../src/model.js';
import type { Message } from '../../../src/schemas.js';
import { echoTool, runFinished, WAIT_MS } from '../../support/driver.js';
import { AWAITING_APPROVAL, guardedTool } from '../../support/hitl.js';

/** Keeps the shape and shortens every tool result: a compaction the script survives. */
const pruning: Compactor = async ({ messages }) => ({
  messages: messages.map((m) => (m.role === 'tool' ? { ...m, content: '[pruned]' } : m)),
  tokensAfter: 100,
});

describe('snapshots are values', () => {
  it('no emitted or persisted snapshot changes after it was handed out', async () => {
    const { tool: write } = guardedTool();
    const model = scriptedModel([
      // run 1: a tool turn over the threshold (compaction), then an approval turn, then an answer
      { text: 'looking', toolCalls: [{ name: 'echo', args: { text: 'a' } }], usage: { inputTokens: 900, outputTokens: 5 } },
      { text: 'writing', toolCalls: [{ name: 'write_file', args: { path: 'a.txt', content: 'x' } }] },
      { text: 'one' },
      // run 2 starts after a rewind that dropped run 1's answer: it answers again; run 3 uses tools
      { toolCalls: [{ name: 'echo', args: { text: 'b' } }, { name: 'echo', args: { text: 'c' } }] },
      { text: 'two' },
    ]);
    const actor = createActor(createAgentMachine({ model, tools: [echoTool, write], compactor: pruning, retry: false }), {
      input: { sessionId: 'values', policy: { contextWindow: 1000 } },
    });
    const seen: { snapshot: ReturnType<typeof actor.getSnapshot>; copy: string }[] = [];
    const persisted: { snapshot: unknown; copy: string }[] = [];
    actor.subscribe((snapshot) => {
      seen.push({ snapshot, copy: JSON.stringify(snapshot.context) });
      const stored = actor.getPersistedSnapshot();
      persisted.push({ snapshot: stored, copy: JSON.stringify(stored) });
    });
    let compactions = 0;
    actor.on('compaction.finished', () => void compactions++);
    actor.start();

    actor.send({ type: 'input', message: 'first' });
    await waitFor(actor, (s) => s.matches(AWAITING_APPROVAL), { timeout: WAIT_MS });
    actor.send({ type: 'approve', toolCallId: 'call_2_0' });
    const first = await runFinished(actor, 1);
    expect(first.outcome).toEqual({ type: 'Completed', finalText: 'one' });
    actor.send({ type: 'rewind', len: first.messages.length - 1 });
    actor.send({ type: 'input', message: 'second' });
    expect((await runFinished(actor, 2)).outcome).toEqual({ type: 'Completed', finalText: 'one' });
    actor.send({ type: 'input', message: 'third' });
    expect((await runFinished(actor, 3)).outcome).toEqual({ type: 'Completed', finalText: 'two' });
    actor.stop();

    expect(compactions).toBeGreaterThan(0);
    expect(seen.length).toBeGreaterThan(10);
    const changed = seen.filter(({ snapshot, copy }) => JSON.stringify(snapshot.context) !== copy).length;
    const changedPersisted = persisted.filter(({ snapshot, copy }) => JSON.stringify(snapshot) !== copy).length;
    expect({ changed, changedPersisted }).toEqual({ changed: 0, changedPersisted: 0 });
  });

  // Without instructions the request could be the log's own list, which grows in place at the next
  // append: a model that keeps its request (a recorder, a test double) would see it change.
  for (const instructions of ['Be brief.', undefined]) {
    it(`the messages a model call was handed never change afterwards, ${instructions ? 'with instructions and' : 'without instructions, with'} history in front`, async () => {
      const requests: { messages: readonly Message[]; copy: string }[] = [];
      const model: Model = {
        name: 'recording',
        generate: async ({ messages }) => {
          requests.push({ messages, copy: JSON.stringify(messages) });
          const last = messages.at(-1)!;
          return last.role === 'user'
            ? { message: { role: 'assistant', content: '', toolCalls: [{ id: `c${requests.length}`, name: 'echo', args: { text: 'x' } }] }, finishReason: 'tool-calls' }
            : { message: { role: 'assistant', content: `answer ${requests.length}` }, finishReason: 'stop' };
        },
      };
      const actor = createActor(createAgentMachine({ model, tools: [echoTool], ...(instructions && { instructions }), retry: false }), { input: { sessionId: 'requests' } });
      actor.start();
      for (let run = 1; run <= 3; run++) {
        actor.send({ type: 'input', message: `question ${run}` });
        expect((await runFinished(actor, run)).outcome.type).toBe('Completed');
      }
      actor.stop();

      // Two calls per run; each later call carries the runs before it.
      expect(requests.map((r) => r.messages.length)).toEqual(instructions ? [2, 4, 6, 8, 10, 12] : [1, 3, 5, 7, 9, 11]);
      expect(requests.filter(({ messages, copy }) => JSON.stringify(messages) !== copy)).toEqual([]);
    });
  }
});
