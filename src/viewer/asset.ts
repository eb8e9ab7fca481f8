import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

/**
 * The page script. The published package ships it built (`dist/viewer-client.js`, bundled by
 * the build's esbuild from `src/viewer/client/main.ts`); running from the sources (tests, a
 * checkout), it is bundled here once per process with the same esbuild.
 */
let script: Promise<string> | undefined;

export function clientScript(): Promise<string> {
  script ??= load();
  return script;
}

async function load(): Promise<string> {
  try {
    return await readFile(new URL('./viewer-client.js', import.meta.url), 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  return bundleClient();
}

/** Bundles the page script: what the build writes to `dist/viewer-client.js`. */
export async function bundleClient(outfile?: string): Promise<string> {
  const { build } = await import('esbuild');
  const result = await build({
    entryPoints: [fileURLToPath(new URL('./client/main.ts', import.meta.url))],
    bundle: true,
    format: 'iife',
    platform: 'browser',
    target: 'es2022',
    minify: true,
    legalComments: 'none',
    write: outfile !== undefined,
    ...(outfile ? { outfile } : {}),
  });
  return outfile ? readFile(outfile, 'utf8') : result.outputFiles![0]!.text;
}
