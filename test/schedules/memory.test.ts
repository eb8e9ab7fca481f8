import { MemorySessionStore } from '../../src/index.js';
import type { ScheduleRow } from '../../src/schedules/row.js';
import { scheduleBackend } from '../../src/schedules/schedules.js';
import { describeScheduleConformance } from './conformance.js';

// A sibling is a second store over the same backing: the schedules live with the backing.
describeScheduleConformance('memory', {
  async create() {
    const store = new MemorySessionStore();
    return {
      store,
      sibling: async () => new MemorySessionStore(store.backing),
      raw: {
        // `insert` stores the JSON of what it is given, unchecked (rows are checked when read).
        async setRow(id, row) {
          const backend = scheduleBackend(store);
          await backend.delete(id);
          await backend.insert(row as ScheduleRow);
        },
      },
    };
  },
});
