import { MemorySessionStore } from '../../src/index.js';
import { describeScheduleConformance } from './conformance.js';

// A sibling is a second store over the same backing: the schedules live with the backing.
describeScheduleConformance('memory', {
  async create() {
    const store = new MemorySessionStore();
    return { store, sibling: async () => new MemorySessionStore(store.backing) };
  },
});
