import { existsSync, statSync } from 'node:fs';
import { join, sep } from 'node:path';
import { maskedAddress } from '../stores/masked-address.js';
import { openSessionStore } from '../stores/open.js';
import type { SessionStore } from '../stores/session-store.js';
import { CliError, UsageError } from './errors.js';
import { escapeLine } from './escape.js';

/** Where `--store` points, parsed the way `openSessionStore` reads it. */
export type StoreLocation =
  | { kind: 'sqlite'; path: string; label: string }
  | { kind: 'memory'; label: string }
  | { kind: 'postgres'; url: string; label: string };

/** The SQLite file of the working directory that commands use without `--store`. */
export const DEFAULT_SQLITE_PATH = '.loopchart/loopchart.db';

/**
 * `--store` (or $LOOPCHART_STORE) as the store to open and the label messages print: the label
 * is user-given text, escaped as stored text is (`escapeLine`), and never shows a password.
 */
export function parseLocation(location: string | undefined): StoreLocation {
  if (location === 'memory:') return { kind: 'memory', label: 'memory:' };
  if (location !== undefined && /^postgres(ql)?:\/\//.test(location)) return { kind: 'postgres', url: location, label: escapeLine(maskedAddress(location)) };
  // Any other URL was taken for a file path: `postgress://u:pw@host/db` made a SQLite file under
  // ./postgress:/u:pw@host/, `sqlite://data.db` one at /data.db, and the command went on.
  if (location !== undefined && /^[a-z][a-z0-9+.-]*:\/\//i.test(location)) {
    throw new UsageError(`the store ${escapeLine(maskedAddress(location))} (--store or $LOOPCHART_STORE) is no store location: postgres:// or postgresql:// for PostgreSQL, a file path or sqlite:PATH for SQLite, or memory:`);
  }
  const path = (location?.startsWith('sqlite:') ? location.slice('sqlite:'.length) : location) || DEFAULT_SQLITE_PATH;
  // SQLite said only "cannot reach the database …: unable to open database file".
  if (lookAt(path) === 'folder') throw new CliError(`the store ${escapeLine(path)} is a folder, not a SQLite file: name the file (--store ${escapeLine(join(path, 'loopchart.db'))})`);
  // Reading commands said "no sessions: s.db/ does not exist", exit 0, while `schedules add` wrote to s.db.
  // On Windows '\\' separates folders too; elsewhere it is a character of a file name.
  const separators = sep === '\\' ? /[\\/]+$/ : /\/+$/;
  if (separators.test(path)) {
    throw new CliError(`the store ${escapeLine(path)} ends in '${path.at(-1)}', which names a folder, not a SQLite file: name the file (--store ${escapeLine(path.replace(separators, ''))})`);
  }
  return { kind: 'sqlite', path, label: escapeLine(path) };
}

/** Longest part of a too-long path a message shows. */
const SHOWN_CHARS = 80;

/** Why the file system will not look up a store path, by its error code: a path that is there or not would say neither. */
const UNREACHABLE = new Map([
  ['ENAMETOOLONG', 'is a path too long for the file system (ENAMETOOLONG): a shorter path, or a name of at most 255 bytes in each folder'],
  ['ELOOP', 'goes round a loop of symbolic links (ELOOP): point it at the file itself'],
  ['EACCES', 'is in a folder this user may not search (EACCES): check the folders\' permissions'],
  ['ENOTDIR', 'goes through a file as if it were a folder (ENOTDIR): check the path'],
]);

/**
 * A folder, or anything else SQLite is left to open or refuse; a path the file system will not
 * look up is a `CliError` (reading commands said "no sessions: … does not exist", exit 0).
 */
function lookAt(path: string): 'folder' | 'other' {
  try {
    return statSync(path, { throwIfNoEntry: false })?.isDirectory() ? 'folder' : 'other';
  } catch (error) {
    const why = UNREACHABLE.get(String((error as NodeJS.ErrnoException).code));
    if (why === undefined) return 'other';
    const shown = path.length > SHOWN_CHARS ? `${escapeLine(path.slice(0, SHOWN_CHARS))}… (${path.length} characters)` : escapeLine(path);
    throw new CliError(`the store ${shown} ${why}`, { cause: error });
  }
}

/**
 * Opens the store, or returns undefined for a SQLite file that does not exist: reading commands
 * must not create an empty database as a side effect.
 */
export async function openExisting(location: StoreLocation, schema: string | undefined): Promise<SessionStore | undefined> {
  switch (location.kind) {
    case 'sqlite':
      return existsSync(location.path) ? openSessionStore(location.path) : undefined;
    case 'memory':
      return openSessionStore('memory:');
    case 'postgres':
      return openSessionStore(location.url, schema ? { schema } : {});
  }
}
