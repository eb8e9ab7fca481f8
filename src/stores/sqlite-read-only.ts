import { accessSync, constants, existsSync } from 'node:fs';
import { StoreError } from './errors.js';

/**
 * Whether `path` is a file this process may read and not write: a backup, a shared file of mode
 * 0444, a read-only mount, an immutable file. Asked of the file system before SQLite opens it,
 * because SQLite would run its write-ahead-log switch and the migrations (writes) first and fail
 * before the first read. A file that does not exist yet is not read-only: the store creates it.
 * Asked by the session store and by the tables kept beside its sessions (schedules, memory).
 */
export function readOnlyFile(path: string): boolean {
  if (path === ':memory:' || !existsSync(path)) return false;
  try {
    accessSync(path, constants.W_OK);
    return false;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'EACCES' || code === 'EPERM' || code === 'EROFS';
  }
}

/** A write refused because the file may only be read (its mode, its owner, a read-only mount). */
export function readOnlyError(where: string, options?: { cause?: unknown }): StoreError {
  return new StoreError(where, 'the file is read-only: it can be listed and loaded, not written; nothing was written', options);
}
