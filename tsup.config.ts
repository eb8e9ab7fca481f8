import { defineConfig } from 'tsup';

export default defineConfig({
  // One entry per public subpath (package.json "exports"); the CLI is the bin.
  entry: {
    index: 'src/index.ts',
    sqlite: 'src/sqlite.ts',
    postgres: 'src/postgres.ts',
    'ai-sdk': 'src/ai-sdk.ts',
    testing: 'src/testing.ts',
    schemas: 'src/schemas-entry.ts',
    restate: 'src/restate.ts',
    mcp: 'src/mcp.ts',
    viewer: 'src/viewer.ts',
    http: 'src/http.ts',
    policies: 'src/policies.ts',
    evals: 'src/evals.ts',
    'mcp-server': 'src/mcp-server.ts',
    schedules: 'src/schedules.ts',
    memory: 'src/memory.ts',
    cli: 'src/cli.ts',
    // Not a subpath: what the entries that need an optional peer load it through (scripts/peer-entries.ts).
    'peer-guard': 'src/missing-package.ts',
  },
  format: ['esm', 'cjs'],
  dts: true,
  // No source maps in the package: they pointed at src/, which is not published, and were 3.4 of
  // its 6.0 MB unpacked. The built code is not minified and keeps its names, so a stack reads as is.
  sourcemap: false,
  clean: true,
  // Shared code goes to chunks in both formats, so `loopchart` and `loopchart/sqlite` share one
  // copy of each class (instanceof holds across subpaths of the same format).
  splitting: true,
  // import.meta.url in the CommonJS build (the SQLite driver's createRequire).
  shims: true,
  // Class names stay as written: error names and `isInstance` compare them across builds.
  keepNames: true,
  // Loaded only to run an --agent .ts module, from the user's own install.
  external: ['tsx'],
  target: 'node20',
  // Built-in imports keep their node: prefix (tsup strips it by default): runtimes and bundlers
  // that know only node: names load the package, and vitest in a linked workspace no longer takes
  // a bare 'stream' for a file of the consumer's (vitest-dev/vitest#11194).
  removeNodeProtocol: false,
  tsconfig: 'tsconfig.build.json',
  // The viewer's page script, built for the browser into the asset the server inlines.
  onSuccess: async () => {
    const { bundleClient } = await import('./src/viewer/asset.js');
    await bundleClient('dist/viewer-client.js');
    const { guardPeerEntries } = await import('./scripts/peer-entries.js');
    guardPeerEntries('dist');
  },
});
