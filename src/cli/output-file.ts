import { closeSync, openSync, readSync } from 'node:fs';
import { CliError } from './errors.js';
import { escapeLine } from './escape.js';

/** The first 16 bytes of every SQLite database file. */
const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');
/** The magic numbers that open a SQLite write-ahead log (`-wal`): committed steps not yet in the database. */
const WAL_MAGIC = new Set([0x377f0682, 0x377f0683]);

/** The first 16 bytes of the file (through links), or nothing when there is none to read. */
function head(path: string): Buffer | undefined {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return undefined;
  }
  try {
    const bytes = Buffer.alloc(16);
    return bytes.subarray(0, readSync(fd, bytes, 0, 16, 0));
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/**
 * Refuses an output file (`-o`, `--results`) that is a SQLite database or its write-ahead log,
 * before anything is written: `view export ID -o loopchart.db` (a slip of tab completion) wrote
 * the HTML over the store, every session lost, and `eval --fresh --results` emptied it. Any other
 * existing file is overwritten, as `-o` says. A `CliError` with exit code 2, the flag named.
 */
export function refuseDatabaseAsOutput(path: string, flag: string): void {
  const bytes = head(path);
  if (!bytes) return;
  const database = bytes.length === 16 && bytes.equals(SQLITE_HEADER);
  const log = bytes.length >= 4 && WAL_MAGIC.has(bytes.readUInt32BE(0));
  if (database || log) {
    throw new CliError(`${flag} ${escapeLine(path)} is a SQLite ${database ? 'database' : 'write-ahead log'} (a store?): it is not overwritten; name another file`, { exitCode: 2 });
  }
}
