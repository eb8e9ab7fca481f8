import { MemoryBacking, MemorySessionStore } from '../../src/stores/memory.js';
import { describeSessionStoreConformance } from './conformance.js';

describeSessionStoreConformance('memory', {
  async create() {
    const backing = new MemoryBacking();
    const row = (sessionId: string) => {
      const found = backing.sessions.get(sessionId);
      if (!found) throw new Error(`no session ${sessionId}`);
      return found;
    };
    return {
      store: new MemorySessionStore(backing),
      sibling: async () => new MemorySessionStore(backing),
      raw: {
        async setMessage(sessionId, position, text) {
          row(sessionId).log.set(position, text);
        },
        async deleteMessage(sessionId, position) {
          row(sessionId).log.delete(position);
        },
        async insertMessage(sessionId, position, text) {
          row(sessionId).log.set(position, text);
        },
        async setState(sessionId, text) {
          row(sessionId).stateJson = text;
        },
        async setJournal(sessionId, turnKey, toolCallId, text) {
          const entry = backing.journal.get(sessionId)?.get(`${turnKey}\0${toolCallId}`);
          if (!entry) throw new Error('no such journal entry');
          entry.json = text;
        },
      },
    };
  },
});
