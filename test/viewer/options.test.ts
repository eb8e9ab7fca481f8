/** startViewer's settings: a wrong type or a value out of range is refused before anything listens. */
import { describe, expect, it } from 'vitest';
import { MemorySessionStore } from '../../src/stores/memory.js';
import { startViewer, ViewerOptionsError } from '../../src/viewer.js';

describe('startViewer options', () => {
  it('a store, port, pollMs or storeLabel of the wrong type or out of range is a ViewerOptionsError naming it', async () => {
    const store = new MemorySessionStore();
    // Before: all accepted. port 'x' listened on a socket file named x, pollMs 0, -1 and 1e12 polled every millisecond,
    // a store 'x' or storeLabel 5 failed the pages later.
    for (const [options, problem] of [
      [{ store: 'x', port: 0 }, /store must be a session store/],
      [{ store, port: 'x' }, /port must be a whole number from 0 to 65535/],
      [{ store, port: 1.5 }, /port must be a whole number/],
      [{ store, port: 0, pollMs: 0 }, /pollMs must be a whole number of ms/],
      [{ store, port: 0, pollMs: -1 }, /pollMs must be/],
      [{ store, port: 0, pollMs: 1e12 }, /pollMs must be/],
      [{ store, port: 0, storeLabel: 5 }, /storeLabel must be a string/],
    ] as const) {
      await expect(startViewer(options as never)).rejects.toThrow(ViewerOptionsError);
      await expect(startViewer(options as never)).rejects.toThrow(problem);
    }
    const viewer = await startViewer({ store, port: 0, pollMs: 100, storeLabel: 'memory' });
    try {
      expect((await fetch(viewer.url)).status).toBe(200);
    } finally {
      await viewer.close();
    }
  });
});
