import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { lazyField, objectSlot } from '../src/object-slot.js';

describe('objectSlot', () => {
  it('keeps a value per object, like a WeakMap keyed by it (null is a value, a cleared slot has none)', () => {
    const slot = objectSlot<object, number>();
    const a = {};
    const b = [1, 2];
    expect(slot.has(a)).toBe(false);
    expect(slot.get(a)).toBeUndefined();
    slot.set(a, 1);
    slot.set(b, 2);
    slot.set(a, 3);
    expect([slot.get(a), slot.get(b), slot.has(a)]).toEqual([3, 2, true]);
    const nothing = objectSlot<object, null>();
    nothing.set(a, null);
    expect([nothing.has(a), nothing.get(a)]).toEqual([true, null]);
    slot.clear(a);
    expect([slot.has(a), slot.get(a)]).toEqual([false, undefined]);
    expect(slot.get(b)).toBe(2);
    slot.set(a, 4);
    expect([slot.has(a), slot.get(a)]).toEqual([true, 4]);
  });

  it('is invisible: JSON, spreading, structuredClone, keys, symbols, inspect and strict equality see the object as it was', () => {
    const slot = objectSlot<object, { secret: string }>();
    const plain = { history: [{ role: 'user', content: 'Hi' }], turns: 1 };
    const stamped = structuredClone(plain);
    slot.set(stamped, { secret: 'kept' });
    slot.set(stamped.history, { secret: 'on the array too' });
    expect(JSON.stringify(stamped)).toBe(JSON.stringify(plain));
    expect({ ...stamped }).toStrictEqual(plain);
    expect(structuredClone(stamped)).toStrictEqual(plain);
    expect(stamped).toStrictEqual(plain);
    expect(Reflect.ownKeys(stamped)).toEqual(['history', 'turns']);
    expect(Reflect.ownKeys(stamped.history)).toEqual(['0', 'length']);
    expect(inspect(stamped, { showHidden: true, depth: 5 })).not.toContain('secret');
    expect(slot.get(stamped)).toEqual({ secret: 'kept' });
  });

  it('slots are independent, and no copy of an object carries its slot', () => {
    const first = objectSlot<object, string>();
    const second = objectSlot<object, string>();
    const target = { a: 1 };
    first.set(target, 'first');
    expect(second.get(target)).toBeUndefined();
    second.set(target, 'second');
    expect([first.get(target), second.get(target)]).toEqual(['first', 'second']);
    expect(first.get({ ...target })).toBeUndefined();
    expect(first.get(Object.assign({}, target))).toBeUndefined();
  });

  it('keeps nothing on an object that cannot be extended, so a cache on it recomputes', () => {
    const slot = objectSlot<object, number>();
    const frozen = Object.freeze({ a: 1 });
    const sealed = Object.seal({ b: 2 });
    slot.set(frozen, 1);
    slot.set(sealed, 2);
    expect([slot.has(frozen), slot.get(frozen), slot.has(sealed), slot.get(sealed)]).toEqual([false, undefined, false, undefined]);
    // A slot set before the object was frozen stays readable.
    const later = { c: 3 };
    slot.set(later, 3);
    Object.freeze(later);
    expect(slot.get(later)).toBe(3);
  });
});

describe('lazyField', () => {
  it('is an own, enumerable field computed from each object\'s own source when read, by one getter for all', () => {
    let reads = 0;
    const withLength = lazyField('length', (source: string[]) => (reads++, source.length));
    const a = withLength({ name: 'a' }, ['x']);
    const b = withLength({ name: 'b' }, ['x', 'y']);
    expect(reads).toBe(0);
    expect([a.length, b.length]).toEqual([1, 2]);
    expect(reads).toBe(2);
    expect(Object.keys(a)).toEqual(['name', 'length']);
    expect({ ...b }).toEqual({ name: 'b', length: 2 });
    expect(JSON.stringify(a)).toBe('{"name":"a","length":1}');
    // One getter for every object: V8 keeps them on one hidden class.
    expect(Object.getOwnPropertyDescriptor(a, 'length')!.get).toBe(Object.getOwnPropertyDescriptor(b, 'length')!.get);
  });

  it('reads the source each time: a source that changes is seen', () => {
    const withFirst = lazyField('first', (source: string[]) => source[0]);
    const source = ['x'];
    const target = withFirst({}, source);
    source[0] = 'y';
    expect(target.first).toBe('y');
  });
});
