/**
 * The `loopchart/restate` entry's two promises to Node 20 users: the SDK gets the
 * `Promise.withResolvers` it needs (a guarded, spec-shaped polyfill, installed only where the
 * runtime has none), and the core entry never loads Restate (nor the polyfill).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
const POLYFILL = pathToFileURL(fileURLToPath(new URL('../../src/restate/polyfill.ts', import.meta.url))).href;

/** Runs an ES module snippet in a fresh node (with tsx) and returns what it printed as JSON. */
function inChild(source: string): unknown {
  const out = execFileSync(process.execPath, ['--import', TSX, '--input-type=module', '-e', source], { encoding: 'utf8', timeout: 30_000 });
  return JSON.parse(out.trim().split('\n').at(-1)!);
}

describe('Promise.withResolvers polyfill (loopchart/restate)', () => {
  it('installs a working, spec-shaped withResolvers where the runtime has none (Node 20)', () => {
    const result = inChild(`
      delete Promise.withResolvers;
      const { installedWithResolversPolyfill } = await import(${JSON.stringify(POLYFILL)});
      const { promise, resolve } = Promise.withResolvers();
      resolve(42);
      const value = await promise;
      const rejected = Promise.withResolvers();
      rejected.reject(new Error('no'));
      const reason = await rejected.promise.catch((e) => e.message);
      class Sub extends Promise {}
      const sub = Sub.withResolvers();
      sub.resolve(1);
      const descriptor = Object.getOwnPropertyDescriptor(Promise, 'withResolvers');
      console.log(JSON.stringify({ installedWithResolversPolyfill, value, reason, subclass: sub.promise instanceof Sub, enumerable: descriptor.enumerable }));
    `);
    expect(result).toEqual({ installedWithResolversPolyfill: true, value: 42, reason: 'no', subclass: true, enumerable: false });
  });

  it("leaves a runtime's own withResolvers alone", () => {
    const result = inChild(`
      const own = function withResolvers() { return 'own'; };
      Object.defineProperty(Promise, 'withResolvers', { value: own, configurable: true, writable: true });
      const { installedWithResolversPolyfill } = await import(${JSON.stringify(POLYFILL)});
      console.log(JSON.stringify({ installedWithResolversPolyfill, same: Promise.withResolvers === own }));
    `);
    expect(result).toEqual({ installedWithResolversPolyfill: false, same: true });
  });
});

describe('the core entry never loads Restate', () => {
  /** Every source file src/index.ts reaches through relative imports. */
  function reachable(entry: string): Map<string, string> {
    const seen = new Map<string, string>();
    const visit = (file: string) => {
      if (seen.has(file)) return;
      const text = readFileSync(file, 'utf8');
      seen.set(file, text);
      for (const match of text.matchAll(/(?:import|export)[^'"]*?from\s+['"](\.[^'"]+)['"]|import\s+['"](\.[^'"]+)['"]/g)) {
        visit(resolve(dirname(file), (match[1] ?? match[2])!.replace(/\.js$/, '.ts')));
      }
    };
    visit(entry);
    return seen;
  }

  it('src/index.ts reaches no module that imports @restatedev or the polyfill', () => {
    const files = reachable(fileURLToPath(new URL('../../src/index.ts', import.meta.url)));
    expect(files.size).toBeGreaterThan(20);
    const offenders = [...files].filter(([file, text]) => /@restatedev\//.test(text) || file.includes('/src/restate/')).map(([file]) => file);
    expect(offenders).toEqual([]);
    // And the walk does find them from the restate entry (the check can fail).
    const restate = reachable(fileURLToPath(new URL('../../src/restate.ts', import.meta.url)));
    expect([...restate.values()].some((text) => /@restatedev\//.test(text))).toBe(true);
  });
});
