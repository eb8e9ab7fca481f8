/**
 * Published entries that need an optional peer package load it behind a guard (tsup's onSuccess
 * runs this on dist/). A static `import pg from 'pg'` fails in the module loader before any of our
 * code runs, with ERR_MODULE_NOT_FOUND and a stack of paths; so the entry tsup built moves to
 * `<name>.peer.js` / `.peer.cjs`, and `<name>.js` / `.cjs` become small modules that load it and
 * turn "not found" for the peer into MissingPackageError: one line, naming what to install.
 *
 * ESM: a top-level await of a dynamic import (only that defers the peer's resolution), then the
 * same export names. CommonJS: a require in try/catch. Types are untouched (`<name>.d.ts`).
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Entry (tsup's name, `loopchart/<name>`) → the peer packages it imports. */
export const PEER_ENTRIES: ReadonlyMap<string, readonly string[]> = new Map([
  ['postgres', ['pg']],
  ['restate', ['@restatedev/restate-sdk']],
  ['mcp', ['@modelcontextprotocol/sdk']],
  ['mcp-server', ['@modelcontextprotocol/sdk']],
]);

/** The names a built ESM module exports: esbuild writes one `export { a, b as c };` at its end. */
export function exportedNames(esm: string): string[] {
  const statement = /export\s*\{([^}]*)\};?\s*$/.exec(esm);
  if (!statement) throw new Error('peer-entries: no export statement at the end of the built entry');
  return statement[1]!
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean)
    .map((part) => part.split(/\s+as\s+/).at(-1)!);
}

export function guardPeerEntries(dist: string, entries: ReadonlyMap<string, readonly string[]> = PEER_ENTRIES): void {
  for (const [name, packages] of entries) {
    const esm = join(dist, `${name}.js`);
    const names = exportedNames(readFileSync(esm, 'utf8'));
    if (names.includes('default')) throw new Error(`peer-entries: ${name} has a default export, which the guard does not re-export`);
    renameSync(esm, join(dist, `${name}.peer.js`));
    renameSync(join(dist, `${name}.cjs`), join(dist, `${name}.peer.cjs`));
    const args = `${JSON.stringify(`loopchart/${name}`)}, ${JSON.stringify(packages)}`;
    const header = `// loopchart/${name} needs ${packages.join(', ')}: loaded behind this guard (scripts/peer-entries.ts).\n`;
    writeFileSync(
      esm,
      `${header}import { peerLoadError } from './peer-guard.js';\n` +
        `const entry = await import('./${name}.peer.js').catch((error) => {\n  throw peerLoadError(error, ${args});\n});\n` +
        `export const { ${names.join(', ')} } = entry;\n`,
    );
    writeFileSync(
      join(dist, `${name}.cjs`),
      `'use strict';\n${header}const { peerLoadError } = require('./peer-guard.cjs');\n` +
        `try {\n  module.exports = require('./${name}.peer.cjs');\n} catch (error) {\n  throw peerLoadError(error, ${args});\n}\n`,
    );
  }
}
