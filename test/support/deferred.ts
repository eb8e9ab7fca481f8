/**
 * A promise with its resolve and reject in hand. Its own module, without vitest or the driver's
 * helpers, so a child process that uses it (test/sessions/fixtures/crash-agent.ts) loads neither.
 */
export function deferred<T = void>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
