#!/usr/bin/env node
/**
 * The loopchart command line: `loopchart sessions list | show ID | resume ID | send ID TEXT | …`
 * on the default store (SQLite at .loopchart/loopchart.db) or the one `--store` names.
 * From a checkout: `npx tsx src/cli.ts sessions list`.
 */
import { main } from './cli/main.js';

// A reader that went away (`loopchart sessions list | head -1`) is how a pipeline ends, not an
// error: stop at once, quietly, with status 0, as a Unix tool killed by SIGPIPE would stop.
const endOnClosedPipe = (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
};
process.stdout.on('error', endOnClosedPipe);
process.stderr.on('error', endOnClosedPipe);

const write = (stream: NodeJS.WriteStream) => (line: string) => void stream.write(`${line}\n`);

main(process.argv.slice(2), { out: write(process.stdout), err: write(process.stderr) }).then((code) => {
  process.exitCode = code;
});
