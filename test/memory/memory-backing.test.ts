import { MemorySessionStore } from '../../src/stores/memory.js';
import { describeMemoryConformance } from './conformance.js';

// A sibling is a second store over the same backing: the memory lives with the backing.
describeMemoryConformance('memory', {
  async create() {
    const store = new MemorySessionStore();
    return { store, sibling: async () => new MemorySessionStore(store.backing) };
  },
});
