import { expect } from 'vitest';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { agentMemory, exportScope } from '../../src/memory.js';
import type { MemoryState } from '../../src/memory/agent-memory.js';
import type { ModelRequest } from '../../src/model.js';
import { DurableSession } from '../../src/sessions/durable-session.js';
import type { SessionStore } from '../../src/stores/session-store.js';
import { scriptedModel } from '../../src/testing.js';

/**
 * Stored memory rows this version does not read (another version wrote them, or they were edited
 * by hand: `spoil` does it to Ada's first entry, ada-1 position 0, and to her working memory),
 * shared by the SQLite and PostgreSQL suites: the next run of the scope goes on without them,
 * each named in the memory's `problems`, and recalls the rows it does read; `exportScope` gives
 * the rows it reads and names the others in its `problems`, as recall does.
 */
export async function unreadableRowsCostOnlyThemselves(store: SessionStore, spoil: () => Promise<void>): Promise<void> {
  const memory = agentMemory({ store });
  try {
    const saver = createAgentMachine({
      model: scriptedModel([{ toolCalls: [{ id: 's1', name: 'memory_update', args: { memory: 'Likes lighthouses.' } }] }, { text: 'The zanzibar lighthouse, noted.' }]),
      operations: [memory],
    });
    const first = await DurableSession.open({ machine: saver, store, sessionId: 'ada-1', scope: 'user:ada' });
    first.send({ type: 'input', message: 'The zanzibar lighthouse is blue.' });
    expect((await first.whenIdle())?.outcome.type).toBe('Completed');
    await first.close();
    await spoil();

    const sent: ModelRequest[] = [];
    const asker = createAgentMachine({ model: scriptedModel([(request) => (sent.push(request), { text: 'Blue, I think.' })]), operations: [memory] });
    const second = await DurableSession.open({ machine: asker, store, sessionId: 'ada-2', scope: 'user:ada' });
    try {
      second.send({ type: 'input', message: 'What colour is the zanzibar lighthouse?' });
      expect((await second.whenIdle())?.outcome).toEqual({ type: 'Completed', finalText: 'Blue, I think.' });
      const system = sent[0]!.messages.filter((m) => m.role === 'system').map((m) => m.content).join('\n');
      // The row it reads is recalled; the spoilt ones are not shown, and the document reads as empty.
      expect(system).toContain('The zanzibar lighthouse, noted.');
      expect(system).not.toContain('is blue');
      expect(system).toContain('<working-memory>\n(empty)\n</working-memory>');
      const slice = second.actor.getSnapshot().context.operations.slices['memory'] as MemoryState;
      expect(slice.problems).toEqual([
        expect.stringMatching(/^the stored working memory is not one this version reads, shown as empty: /),
        expect.stringMatching(/^a stored memory entry \(session "ada-1", position 0\) is not one this version reads, left out: /),
      ]);
    } finally {
      await second.close();
    }

    // The export: every row it reads, the spoilt ones left out and named; no row returned unchecked.
    const exported = await exportScope(store, 'user:ada');
    expect(exported.working).toBeNull();
    expect(exported.entries.map((entry) => `${entry.sessionId}:${entry.position} ${entry.role}: ${entry.text}`)).toEqual([
      'ada-1:1 assistant: The zanzibar lighthouse, noted.',
      'ada-2:0 user: What colour is the zanzibar lighthouse?',
      'ada-2:1 assistant: Blue, I think.',
    ]);
    expect(exported.problems).toEqual([
      expect.stringMatching(/^the stored working memory is not one this version reads, shown as empty: /),
      expect.stringMatching(/^a stored memory entry \(session "ada-1", position 0\) is not one this version reads, left out: /),
    ]);
  } finally {
    await memory.close();
  }
}
