#!/usr/bin/env node
/**
 * The loopchart command line: `loopchart sessions list | show ID | resume ID | send ID TEXT | …`
 * on the default store (SQLite at .loopchart/loopchart.db) or the one `--store` names.
 * From a checkout: `npx tsx src/cli.ts sessions list`.
 */
import { escapeLine, escapeText } from './cli/escape.js';
import { main } from './cli/main.js';

// A reader that went away (`loopchart sessions list | head -1`) is how a pipeline ends, not an
// error: stop at once, quietly, with status 0, as a Unix tool killed by SIGPIPE would stop.
// Any other failed write (ENOSPC: `> out.txt` on a full disk, EIO) is an error: one line and
// status 1; it was thrown again, a stack trace. When stderr is what fails, the status is all.
const endOnFailedWrite = (stream: 'stdout' | 'stderr') => (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  if (stream === 'stdout') {
    const reason = /^[A-Z]+: (.+?), \w+$/.exec(error.message)?.[1] ?? error.message;
    try {
      process.stderr.write(`loopchart: cannot write to stdout: ${reason}${error.code ? ` (${error.code})` : ''}\n`);
    } catch {
      // stderr is gone too: the status still says it.
    }
  }
  process.exit(1);
};
process.stdout.on('error', endOnFailedWrite('stdout'));
process.stderr.on('error', endOnFailedWrite('stderr'));

// An error nothing caught (a timer in an agent's tool or model that throws, a promise it left
// rejected) ends the command as Node would, status 1, but in one line like every other failure:
// Node printed the stack and the source line. What a run committed stays stored.
const endOnUncaught = (error: unknown) => {
  const described = error instanceof Error ? `${error.name}: ${error.message.split('\n')[0]}` : String(error);
  process.stderr.write(`loopchart: uncaught error (in the agent's code?): ${escapeLine(described)} (LOOPCHART_DEBUG=1 prints the stack)\n`);
  if (process.env.LOOPCHART_DEBUG) process.stderr.write(`${escapeText(String((error as Error)?.stack ?? error))}\n`);
  process.exit(1);
};
process.on('uncaughtException', endOnUncaught);
process.on('unhandledRejection', endOnUncaught);

const write = (stream: NodeJS.WriteStream) => (line: string) => void stream.write(`${line}\n`);

main(process.argv.slice(2), { out: write(process.stdout), err: write(process.stderr) }).then((code) => {
  process.exitCode = code;
});
