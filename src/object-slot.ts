/**
 * A value kept on an object in a private slot: what a `WeakMap` keyed by the object would hold,
 * stored instead as a private class field stamped onto the object itself.
 *
 * Why not a WeakMap: in V8 a WeakMap entry whose key and value are both young keeps them alive
 * through young-generation collections (a plain loop setting one entry per iteration peaks at
 * 51 MB of heap against 2.4 MB without it, and a WeakSet or a field does not do this). The driver
 * caches facts about each step's objects (a context's log, a log's token count, a reply's
 * answer), so with WeakMaps every step's objects were promoted to the old generation and piled
 * up there until a full collection.
 *
 * A slot is invisible: private fields are not enumerable, not symbols, not seen by JSON,
 * spreading, `structuredClone`, `util.inspect` or equality checks, and no one else can read or
 * forge one. A slot cannot be added to a frozen (or otherwise non-extensible) object: `set` then
 * keeps nothing, and `get` answers `undefined`, so a cache built on it recomputes.
 *
 * @example
 * ```ts
 * const measured = objectSlot<object, number>();
 * const list = [1, 2, 3];
 * measured.set(list, 6);
 * measured.get(list); // 6
 * JSON.stringify(list); // '[1,2,3]'
 * ```
 */
export function objectSlot<K extends object, V>(): ObjectSlot<K, V> {
  class Slot extends Stamp {
    #value: V | undefined;
    static get(target: object): V | undefined {
      return #value in target ? (target as Slot).#value : undefined;
    }
    static set(target: object, value: V | undefined): void {
      if (#value in target) (target as Slot).#value = value;
      else if (value !== undefined && Object.isExtensible(target)) (new Slot(target) as Slot).#value = value;
    }
  }
  return {
    has: (target) => Slot.get(target) !== undefined,
    get: Slot.get,
    set: Slot.set,
    clear: (target) => Slot.set(target, undefined),
  };
}

/**
 * The slot's operations, as a WeakMap's. A slot holds a value or nothing: `undefined` is not a
 * value (`set` with it is `clear`), so `has` is `get(target) !== undefined`. A cleared slot stays
 * on the object, empty (a private field cannot be deleted).
 */
export interface ObjectSlot<K extends object, V> {
  has(target: K): boolean;
  get(target: K): V | undefined;
  set(target: K, value: V): void;
  clear(target: K): void;
}

/**
 * Returns the object it is given: a class that extends it and is called with `new Sub(target)`
 * adds its private fields to `target` instead of to a new object.
 */
class Stamp {
  constructor(target: object) {
    return target;
  }
}

/**
 * An own, enumerable property read through one getter shared by every object that has it, its
 * value computed on each read from a source kept in a slot on the object. What an object literal's
 * getter gives (a field computed when read, seen by spreading and `Object.keys`), without its
 * cost: a getter written in a literal is a new function per object, and V8 answers each such
 * object with a dictionary of its own instead of a shared hidden class.
 *
 * @example
 * ```ts
 * const withLength = lazyField('length', (list: string[]) => list.length);
 * const summary = withLength({ name: 'tags' }, ['a', 'b']);
 * Object.keys(summary); // ['name', 'length']: the length is read when first asked for
 * ```
 */
export function lazyField<S extends object, V, N extends string>(name: N, read: (source: S) => V) {
  const sources = objectSlot<object, S>();
  const field: PropertyDescriptor = {
    get(this: object): V {
      return read(sources.get(this)!);
    },
    enumerable: true,
    configurable: true,
  };
  return <T extends object>(target: T, source: S): T & { readonly [K in N]: V } => {
    Object.defineProperty(target, name, field);
    sources.set(target, source);
    return target as T & { readonly [K in N]: V };
  };
}

/**
 * A context's `signal` (a tool call's, an operation hook's), made when first read: Node builds an
 * AbortController's signal lazily (an EventTarget, a few µs), and most tools and hooks never look.
 *
 * @example
 * ```ts
 * const context = withSignal({ toolCallId: 'c1' }, new AbortController());
 * context.signal.aborted; // false: the signal is made here
 * ```
 */
export const withSignal: <T extends object>(target: T, controller: AbortController) => T & { readonly signal: AbortSignal } = lazyField(
  'signal',
  (controller: AbortController) => controller.signal,
);
