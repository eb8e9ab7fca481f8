/**
 * `npm run bench [name...]`: runs every bench/*.bench.ts (or the named ones) and prints tables.
 * Benches are scripts, not timed tests: the machines are shared, so read medians and ratios.
 */
import { readdirSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { dirname, join } from 'node:path';

const here = dirname(fileURLToPath(import.meta.url));
const wanted = process.argv.slice(2);
const files = readdirSync(here)
  .filter((file) => file.endsWith('.bench.ts'))
  .filter((file) => wanted.length === 0 || wanted.some((name) => file.startsWith(name)))
  .sort();

for (const file of files) {
  const bench = (await import(pathToFileURL(join(here, file)).href)) as { run: () => Promise<void> | void };
  await bench.run();
}
