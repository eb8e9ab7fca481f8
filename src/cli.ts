#!/usr/bin/env node
/**
 * The loopchart command line: `loopchart sessions list | show ID | resume ID | rewind ID N`
 * on the default store (SQLite at .loopchart/loopchart.db) or the one `--store` names.
 * From a checkout: `npx tsx src/cli.ts sessions list`.
 */
import { main } from './cli/main.js';

const write = (stream: NodeJS.WriteStream) => (line: string) => void stream.write(`${line}\n`);

main(process.argv.slice(2), { out: write(process.stdout), err: write(process.stderr) }).then((code) => {
  process.exitCode = code;
});
