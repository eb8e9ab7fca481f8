/**
 * The facade's boundaries (issue 10): tool arguments that would make the machine
 * unserializable are refused (bug 10), model-chosen ids that collide with Object.prototype
 * work like any other (bug 7), and the feeds that would silently lose work.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidFeedError } from '../../src/errors.js';
import { jsonValueProblem, MAX_JSON_DEPTH } from '../../src/json-value.js';
import { LoopMachine } from '../../src/brain/loop-machine.js';
import type { Message, ToolCall } from '../../src/schemas.js';
import {
  asst,
  call,
  expectInvalid,
  inAwaitingCompaction,
  inAwaitingModel,
  inAwaitingTools,
  inStart,
  notAvailable,
  snap,
  toolMsg,
  user,
} from '../support/brain.js';

const nested = (depth: number): unknown => {
  let value: unknown = 'leaf';
  for (let i = 0; i < depth; i++) value = { d: value };
  return value;
};
const cyclic = () => {
  const value: Record<string, unknown> = { a: 1 };
  value.self = value;
  return value;
};
class Point {
  x = 1;
}

/** Arguments the machine must refuse, and the path its refusal names. */
const UNSERIALIZABLE: Array<[string, unknown, string]> = [
  ['a function', () => 1, 'args'],
  ['a nested function', { run: () => 1 }, 'args.run'],
  ['a BigInt', { n: 10n }, 'args.n'],
  ['a symbol', [Symbol('s')], 'args[0]'],
  ['a cycle', cyclic(), 'args.self'],
  [`nesting ${MAX_JSON_DEPTH + 1} deep`, nested(MAX_JSON_DEPTH + 1), 'args'],
  ['nesting 3,000 deep', nested(3000), 'args'],
  ['undefined args', undefined, 'args'],
  ['an undefined field', { a: undefined }, 'args.a'],
  ['NaN', { n: Number.NaN }, 'args.n'],
  ['Infinity', { n: Number.POSITIVE_INFINITY }, 'args.n'],
  ['a Date', { when: new Date(0) }, 'args.when'],
  ['a Map', new Map([['a', 1]]), 'args'],
  ['a class instance', new Point(), 'args'],
  ['a hole in an array', [1, , 3], 'args[1]'], // eslint-disable-line no-sparse-arrays
  ['a getter', Object.defineProperty({}, 'g', { get: () => 1, enumerable: true }), 'args.g'],
];

describe('bug 10: tool arguments the machine could not serialize are refused', () => {
  for (const [what, args, path] of UNSERIALIZABLE) {
    it(`${what}: InvalidFeedError naming ${path}, machine unchanged and still serializable`, () => {
      const m = inAwaitingModel();
      const e = expectInvalid(m, 'modelResponse', () => m.modelResponse(asst('', [{ id: 'c', name: 'read', args }]), 10, ['read']));
      expect(e.message).toContain(`modelResponse: response.toolCalls[0].${path}`);
      expect(() => LoopMachine.restore(JSON.parse(JSON.stringify(m.toJSON())))).not.toThrow();
    });
  }

  it('the same rule holds for every feed that carries messages: starting history, compactionResult, adoptPruned, inject', () => {
    const bad: Message = asst('', [{ id: 'c', name: 'read', args: { n: 1n } }]);
    const history = [user('u'), bad, toolMsg('c')];
    expect(() => new LoopMachine({ history })).toThrow(InvalidFeedError);
    const compacting = inAwaitingCompaction('Emergency');
    expectInvalid(compacting, 'compactionResult', () => compacting.compactionResult(history, 960, 10));
    const m = inAwaitingTools();
    const pruned = m.fullHistory().map((x) => (x.role === 'assistant' ? { ...x, toolCalls: [{ ...x.toolCalls![0]!, args: () => 1 }] } : x));
    expectInvalid(m, 'adoptPruned', () => m.adoptPruned(pruned));
  });

  it('counts past 2^53 are refused wherever a count enters', () => {
    const big = 2 ** 53;
    const model = inAwaitingModel();
    expectInvalid(model, 'modelResponse', () => model.modelResponse(asst('x'), big, []));
    const start = inStart();
    expectInvalid(start, 'setContextTokens', () => start.setContextTokens(big));
    const compacting = inAwaitingCompaction('Emergency');
    expectInvalid(compacting, 'compactionNoop', () => compacting.compactionNoop(big, 1));
    expectInvalid(compacting, 'compactionResult', () => compacting.compactionResult([user('s')], 960, big));
    const rest = new LoopMachine({ history: [user('a')] });
    expectInvalid(rest, 'rewindTo', () => rest.rewindTo(big));
  });

  it('whatever the machine accepts it serializes and restores to the same state (fast-check, any values as args)', () => {
    let accepted = 0;
    let refused = 0;
    fc.assert(
      fc.property(fc.anything({ maxDepth: 4 }), fc.integer({ min: 0, max: 2 ** 54 }), (args, tokens) => {
        const m = inAwaitingModel();
        try {
          m.modelResponse(asst('', [{ id: 'c', name: 'read', args } as ToolCall]), tokens, ['read']);
        } catch (error) {
          expect(error).toBeInstanceOf(InvalidFeedError);
          refused++;
          return;
        }
        accepted++;
        const json = JSON.parse(JSON.stringify(m.toJSON()));
        const restored = LoopMachine.restore(json);
        expect(JSON.parse(JSON.stringify(restored.toJSON()))).toEqual(json);
        expect(jsonValueProblem(m.toJSON())).toBeNull();
      }),
      { numRuns: 1000 },
    );
    expect(accepted).toBeGreaterThan(100);
    expect(refused).toBeGreaterThan(100);
  });
});

describe('bug 7: ids and names that collide with Object.prototype are ordinary strings', () => {
  const NAMES = ['__proto__', 'constructor', 'toString', 'valueOf', 'hasOwnProperty'];

  it('as tool-call ids and tool names: classified, answered in any order, restored', () => {
    const m = inAwaitingModel();
    const calls = NAMES.map((name, i) => call(NAMES[(i + 1) % NAMES.length]!, name, { i }));
    // Advertise all but one: the unadvertised one is pre-answered by the brain.
    const advertised = NAMES.filter((name) => name !== 'valueOf');
    m.modelResponse(asst('', calls), 10, advertised);
    const step = m.nextStep();
    expect(step.type).toBe('CallTools');
    const pending = step.type === 'CallTools' ? step.calls : [];
    expect(pending.map((p) => p.call.id)).toEqual(calls.map((c) => c.id));
    expect(pending.filter((p) => p.preAnswered).map((p) => p.call.name)).toEqual(['valueOf']);
    const restored = LoopMachine.restore(snap(m));
    const results = pending.map((p) => p.preAnswered ?? toolMsg(p.call.id, p.call.name, `ran ${p.call.name}`)).reverse();
    for (const machine of [m, restored]) {
      machine.toolResults(results);
      expect(machine.state()).toEqual({ type: 'Start' });
      expect(machine.fullHistory().slice(-NAMES.length).map((x) => (x.role === 'tool' ? x.toolCallId : ''))).toEqual(calls.map((c) => c.id));
    }
    expect(m.fullHistory().at(-2)).toEqual(notAvailable('hasOwnProperty', 'valueOf'));
  });

  it('a result for an id named like a prototype member that nobody called is still refused', () => {
    const m = inAwaitingTools();
    for (const id of NAMES) {
      const e = expectInvalid(m, 'toolResults', () => m.toolResults([toolMsg('c1'), toolMsg(id)]));
      expect(e.message).toContain(`answers '${id}', which is not a pending tool call`);
    }
  });

  it('in conversations from outside and in snapshots', () => {
    const history: Message[] = [user('u'), asst('', [call('__proto__'), call('constructor')]), toolMsg('constructor'), toolMsg('__proto__')];
    const m = new LoopMachine({ history });
    expect(LoopMachine.restore(snap(m)).history()).toEqual(history);
    expect(() => new LoopMachine({ history: [user('u'), toolMsg('toString')] })).toThrow("answers no open tool call ('toString')");
  });
});

describe('feeds that would silently lose work', () => {
  it('inject of a tool result with no call is refused (it would answer nothing)', () => {
    for (const m of [inStart(), inAwaitingModel(), inAwaitingCompaction()]) {
      const e = expectInvalid(m, 'inject', () => m.inject(toolMsg('orphan')));
      expect(e.message).toContain("tool result for 'orphan'");
    }
  });

  // Seed 000, the feeds' table: accept_input is legal "from any non-terminal" and "clears
  // pending". The seed requires it, so it stays; the facade documents it and this pins it.
  it('acceptInput mid-run is the seed’s restart: it drops the in-flight turn and keeps history (documented)', () => {
    const m = inAwaitingTools();
    const history = m.history();
    m.acceptInput(user('start over'));
    expect(m.state()).toEqual({ type: 'Start' });
    expect(m.history()).toEqual(history);
    expect(m.fullHistory()).toEqual([...history, user('start over')]);
    expect(m.turnsTaken()).toBe(0);
  });
});
