/** openSessionStore: one string picks a store; anything else is refused before a store is opened. */
import { describe, expect, it } from 'vitest';
import { InvalidConfigError } from '../../src/errors.js';
import { openSessionStore } from '../../src/stores/open.js';

describe('openSessionStore', () => {
  it('a location that is no string, or a schema that is no string, is an InvalidConfigError naming it', async () => {
    // Before: openSessionStore(5) threw a raw TypeError 'location?.startsWith is not a function', and a schema of 5 was dropped.
    await expect(openSessionStore(5 as never)).rejects.toThrow(InvalidConfigError);
    await expect(openSessionStore(5 as never)).rejects.toThrow(/location must be a string/);
    await expect(openSessionStore('memory:', { schema: 5 as never })).rejects.toThrow(/schema must be a string/);
    await expect(openSessionStore('memory:', 'x' as never)).rejects.toThrow(InvalidConfigError);
    const store = await openSessionStore('memory:');
    expect(await store.load('none')).toBeUndefined();
  });
});
