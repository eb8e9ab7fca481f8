/**
 * The Restate SDK (every version from 1.14.5 to 1.17.2) calls `Promise.withResolvers`, which
 * Node 20 lacks: without it every invocation fails with a TypeError and the server retries it
 * forever. This module installs a spec-shaped stand-in, and only when the runtime has none, so
 * Node 22+ keeps its own. It is imported first by `loopchart/restate`, before the SDK loads;
 * the core entry never imports it, so plain `loopchart` users' `Promise` is never touched.
 */

interface Resolvers<T> {
  promise: Promise<T>;
  resolve: (value: T | PromiseLike<T>) => void;
  reject: (reason?: unknown) => void;
}

/**
 * Whether `loopchart/restate` had to install the stand-in (true on Node 20, false on a runtime
 * that has its own).
 *
 * @example
 * ```ts
 * import { installedWithResolversPolyfill } from 'loopchart/restate';
 * console.log(`Promise.withResolvers polyfilled: ${installedWithResolversPolyfill}`);
 * ```
 */
export const installedWithResolversPolyfill: boolean = installWithResolvers();

function installWithResolvers(): boolean {
  if (typeof (Promise as { withResolvers?: unknown }).withResolvers === 'function') return false;
  Object.defineProperty(Promise, 'withResolvers', {
    // As the spec's NewPromiseCapability(this): a subclass calling it gets its own kind of promise.
    value: function withResolvers<T>(this: PromiseConstructor): Resolvers<T> {
      let resolve!: Resolvers<T>['resolve'];
      let reject!: Resolvers<T>['reject'];
      const promise = new this<T>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      return { promise, resolve, reject };
    },
    writable: true,
    configurable: true,
    enumerable: false,
  });
  return true;
}
