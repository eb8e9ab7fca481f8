/**
 * An entry that needs an optional peer (`loopchart/postgres` → pg, `/restate`, `/mcp`,
 * `/mcp-server`) reports a missing one as MissingPackageError, one line naming what to install,
 * not as the module loader's ERR_MODULE_NOT_FOUND. The consumer suite imports the published
 * entries without their peers; this checks the pieces on real loader errors, in milliseconds.
 */
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { MissingPackageError } from '../../src/errors.js';
import { isMissingPackage, peerLoadError } from '../../src/missing-package.js';
import { exportedNames, PEER_ENTRIES } from '../../scripts/peer-entries.js';

const ABSENT = 'loopchart-absent-peer-for-tests';
const requireHere = createRequire(import.meta.url);
const importError = () => import(/* @vite-ignore */ `${ABSENT}/client/index.js`).then(() => undefined, (error: unknown) => error);
const requireError = (specifier: string) => {
  try {
    requireHere(specifier);
  } catch (error) {
    return error;
  }
  return undefined;
};

describe('a missing optional peer', () => {
  it('ESM (a package) and CommonJS (a path in it) loader errors become MissingPackageError naming the package and the command', async () => {
    for (const error of [await importError(), requireError(`${ABSENT}/client/index.js`), requireError(ABSENT)]) {
      expect(isMissingPackage(error, ABSENT), String(error)).toBe(true);
      const reported = peerLoadError(error, 'loopchart/mcp', ['other-package', ABSENT]);
      expect(MissingPackageError.isInstance(reported)).toBe(true);
      expect((reported as MissingPackageError).message).toBe(`loopchart/mcp needs the package '${ABSENT}', which is not installed: npm install ${ABSENT}`);
      expect((reported as MissingPackageError).packageName).toBe(ABSENT);
      expect((reported as MissingPackageError).cause).toBe(error);
    }
  });

  it('any other error passes through as it is: another missing package, a package whose name only starts the same, a throw', async () => {
    const error = await importError();
    expect(peerLoadError(error, 'loopchart/mcp', ['pg'])).toBe(error);
    expect(isMissingPackage(requireError(`${ABSENT}-more`), ABSENT)).toBe(false);
    const thrown = new TypeError('boom');
    expect(peerLoadError(thrown, 'loopchart/postgres', ['pg'])).toBe(thrown);
  });

  it('the guarded entries are the ones whose peers are optional, and the export names are read from the built module', () => {
    const manifest = requireHere('../../package.json') as { peerDependenciesMeta: Record<string, { optional?: boolean }>; exports: Record<string, unknown> };
    for (const [entry, packages] of PEER_ENTRIES) {
      if (manifest.exports[`./${entry}`] === undefined) continue; // an entry not published yet
      for (const name of packages) expect(manifest.peerDependenciesMeta[name]?.optional, `${entry}: ${name}`).toBe(true);
    }
    expect(exportedNames('var a = 1;\nexport {\n  A,\n  b as B,\n  c\n};\n')).toEqual(['A', 'B', 'c']);
    expect(() => exportedNames('module.exports = {};')).toThrow(/no export statement/);
  });
});
