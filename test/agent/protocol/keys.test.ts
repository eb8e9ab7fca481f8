import { describe, expect, it } from 'vitest';
import { childSessionOf, innerKey, keyOf, parseKey, runKeyOf, serviceKey, turnOf, type KeyParts } from '../../../src/agent/protocol/keys.js';

// Stored session rows, tool journals and Restate journals hold these strings: they are pinned
// exactly, and each must read back as the parts it was built from.
const at = { session: 's', run: 2, turn: 3 };
const PINNED: ReadonlyArray<readonly [KeyParts, string]> = [
  [{ kind: 'toolset', session: 's', run: 2 }, 's:run-2:toolset'],
  [{ kind: 'guardCheck', stage: 'input', session: 's', run: 2 }, 's:run-2:guard-input'],
  [{ kind: 'guardrail', stage: 'input', session: 's', run: 2, guardrail: 'pii' }, 's:run-2:guard-input:pii'],
  [{ kind: 'model', ...at }, 's:run-2:turn-3:model'],
  [{ kind: 'tools', ...at }, 's:run-2:turn-3:tools'],
  [{ kind: 'compaction', ...at }, 's:run-2:turn-3:compaction'],
  [{ kind: 'guardCheck', stage: 'output', ...at }, 's:run-2:turn-3:model:guard'],
  [{ kind: 'guardrail', stage: 'output', ...at, guardrail: 'tone' }, 's:run-2:turn-3:model:guard:tone'],
  [{ kind: 'point', hook: 'beforeModelCall', ...at }, 's:run-2:turn-3:model:before'],
  [{ kind: 'point', hook: 'afterReply', ...at }, 's:run-2:turn-3:model:after'],
  [{ kind: 'point', hook: 'beforeTools', ...at }, 's:run-2:turn-3:tools:before'],
  [{ kind: 'operation', hook: 'beforeModelCall', ...at, operation: 'memory' }, 's:run-2:turn-3:model:before:memory'],
  [{ kind: 'operation', hook: 'afterReply', ...at, operation: 'memory' }, 's:run-2:turn-3:model:after:memory'],
  [{ kind: 'operation', hook: 'beforeTools', ...at, operation: 'memory' }, 's:run-2:turn-3:tools:before:memory'],
  [{ kind: 'approvals', ...at }, 's:run-2:turn-3:tools:approvals'],
  [{ kind: 'policy', ...at, call: 'c1' }, 's:run-2:turn-3:tools:approvals:c1:policy'],
  [{ kind: 'approval', ...at, call: 'c1' }, 's:run-2:turn-3:tools:approvals:c1:approval'],
  [{ kind: 'tool', ...at, call: 'c1', rerun: 0 }, 's:run-2:turn-3:tools:c1'],
  [{ kind: 'tool', ...at, call: 'c1', rerun: 2 }, 's:run-2:turn-3:tools:c1:rerun-2'],
  [{ kind: 'toolStart', ...at, call: 'c1', rerun: 0 }, 's:run-2:turn-3:tools:c1:started'],
  [{ kind: 'toolStart', ...at, call: 'c1', rerun: 2 }, 's:run-2:turn-3:tools:c1:started-2'],
  [{ kind: 'toolStarts', ...at }, 's:run-2:turn-3:tools:started'],
];

/** The same parts in a session whose id and names hold the separators keys use. */
const awkward = (parts: KeyParts): KeyParts => {
  const named: Record<string, unknown> = { ...parts, session: 'team:a/run-1:turn-1:c1:run-9:x' };
  if ('call' in parts) named.call = 'fn:0/b';
  if ('operation' in parts) named.operation = 'ns:memory/v2';
  if ('guardrail' in parts) named.guardrail = 'pii:strict/v1';
  return named as unknown as KeyParts;
};

describe('side-effect keys', () => {
  it('builds each kind as the stored string', () => {
    for (const [parts, key] of PINNED) expect(keyOf(parts)).toBe(key);
    expect(serviceKey({ sessionId: 's', runIndex: 2 }, 3, 'tools')).toBe('s:run-2:turn-3:tools');
    expect(runKeyOf({ session: 's', run: 2 })).toBe('s:run-2:');
    expect(childSessionOf({ session: 'support-42', run: 1, turn: 1, call: 'call_7' })).toBe('support-42/run-1:turn-1:call_7');
  });

  it('builds a side effect inside a step from the step key the IO is handed, as keyOf does from the parts', () => {
    const stepOf = (parts: KeyParts): KeyParts | null => {
      switch (parts.kind) {
        case 'guardrail':
          return parts.stage === 'input' ? { kind: 'guardCheck', stage: 'input', session: parts.session, run: parts.run } : { kind: 'guardCheck', stage: 'output', ...turnOf(parts) };
        case 'operation':
          return { kind: 'point', hook: parts.hook, ...turnOf(parts) };
        case 'policy':
        case 'approval':
          return { kind: 'approvals', ...turnOf(parts) };
        case 'tool':
        case 'toolStart':
        case 'toolStarts':
          return { kind: 'tools', ...turnOf(parts) };
        default:
          return null;
      }
    };
    let inner = 0;
    for (const [pinned] of PINNED) {
      for (const parts of [pinned, awkward(pinned)]) {
        const step = stepOf(parts);
        if (!step) continue;
        inner++;
        expect(innerKey(keyOf(step), parts as Parameters<typeof innerKey>[1])).toBe(keyOf(parts));
      }
    }
    expect(inner).toBe(2 * 12);
  });

  it('parses each key back to its parts', () => {
    for (const [parts, key] of PINNED) {
      expect(parseKey(key)).toEqual(parts);
      expect(parseKey(key, 's')).toEqual(parts);
    }
  });

  it('round-trips ids that hold ":" and "/", given the session', () => {
    for (const [parts] of PINNED) {
      const named = awkward(parts);
      const key = keyOf(named);
      expect(key.startsWith('team:a/run-1:turn-1:c1:run-9:x:run-2:')).toBe(true);
      expect(parseKey(key, named.session)).toEqual(named);
    }
  });

  it('round-trips a session id with ":run-" in it without being told the session', () => {
    for (const [parts] of PINNED) {
      const named = { ...parts, session: 'job:run-7:a/b' } as KeyParts;
      expect(parseKey(keyOf(named))).toEqual(named);
    }
    // A child session's keys: the parent's id, a '/', the call's place in the parent.
    const child = childSessionOf({ session: 'p:q', run: 1, turn: 2, call: 'c:7' });
    expect(parseKey(keyOf({ kind: 'model', session: child, run: 1, turn: 1 }))).toEqual({ kind: 'model', session: child, run: 1, turn: 1 });
  });

  it('refuses strings no builder makes', () => {
    for (const key of ['', 's', 's:run-x:toolset', 's:run-01:toolset', 's:run-1:turn-1:other', 's:run-1:turn-1:tools:', 's:run-1:toolset:more']) {
      expect(parseKey(key)).toBeNull();
    }
    expect(parseKey('s:run-1:toolset', 'other')).toBeNull();
  });
});
