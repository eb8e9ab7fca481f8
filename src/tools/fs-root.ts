import { lstat, readlink, realpath } from 'node:fs/promises';
import path from 'node:path';
import { FileToolError, PathOutsideRootError } from './errors.js';

/** As Linux allows (MAXSYMLINKS): past this many links in one path, it is a loop. */
const MAX_SYMLINK_HOPS = 40;

/**
 * Resolves `requested` (relative to `root`, or absolute) to the real path it names, or throws
 * PathOutsideRootError when that real location is outside the real root.
 *
 * Every component is resolved in turn: an existing component is `lstat`ed and, when it is a
 * symlink, replaced by its target, which is resolved the same way (chains included, up to 40
 * links). The first component that does not exist ends the walk: the rest of the path is
 * plain names under it, so the final location is known without following anything more. That is
 * how a dangling link (`link -> ../out/new.txt`) is judged by where it points, not by its own
 * place in the root. The result contains no symlink: callers open it with `O_NOFOLLOW` so a link
 * created after this check is refused rather than followed.
 *
 * This guards against a model's mistakes and curiosity, not against a hostile process racing to
 * swap directories for symlinks between this check and the use of the path.
 */
export async function resolveInRoot(root: string, requested: string): Promise<string> {
  if (requested.includes('\0')) throw new FileToolError(requested, 'invalid path: it contains a NUL character');
  const realRoot = await realpath(root);
  const target = path.resolve(realRoot, requested);
  if (!isInside(realRoot, target)) throw new PathOutsideRootError(requested);

  // The real root has no links left in it: the walk starts there.
  let current = realRoot;
  const remaining = components(path.relative(realRoot, target));
  let hops = 0;
  while (remaining.length > 0) {
    const name = remaining.shift()!;
    if (name === '.') continue;
    if (name === '..') {
      current = path.dirname(current);
      continue;
    }
    const next = path.join(current, name);
    let isLink: boolean;
    try {
      isLink = (await lstat(next)).isSymbolicLink();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      // Nothing exists from here on: the rest are names to create, with no link left to follow.
      current = path.join(next, ...remaining);
      break;
    }
    if (!isLink) {
      current = next;
      continue;
    }
    if (++hops > MAX_SYMLINK_HOPS) throw new FileToolError(requested, 'too many levels of symbolic links');
    const linkTarget = path.resolve(current, await readlink(next));
    remaining.unshift(...components(linkTarget));
    current = path.parse(linkTarget).root;
  }
  if (!isInside(realRoot, current)) throw new PathOutsideRootError(requested);
  return current;
}

function components(absolute: string): string[] {
  return absolute.split(path.sep).filter((part) => part !== '');
}

function isInside(root: string, candidate: string): boolean {
  const relative = path.relative(root, candidate);
  return relative === '' || (relative !== '..' && !relative.startsWith(`..${path.sep}`) && !path.isAbsolute(relative));
}

/** Plain words for the file-system errors a file tool meets; anything else is named by its code. */
const PROBLEMS = new Map<string, string>([
  ['ENOENT', 'no such file or directory'],
  ['ENOTDIR', 'not a directory'],
  ['EISDIR', 'is a directory'],
  ['EACCES', 'permission denied'],
  ['EPERM', 'permission denied'],
  ['ELOOP', 'too many levels of symbolic links'],
  ['ENAMETOOLONG', 'file name too long'],
  ['EEXIST', 'already exists'],
  ['ENOSPC', 'no space left on device'],
  ['EDQUOT', 'disk quota exceeded'],
  ['EROFS', 'read-only file system'],
  ['EBUSY', 'resource busy'],
  ['EMFILE', 'too many open files'],
  ['ENFILE', 'too many open files'],
  ['EFBIG', 'file too large'],
  ['EINVAL', 'invalid argument'],
  ['EIO', 'input/output error'],
]);

/**
 * Node's fs errors carry the absolute host path in their message (ELOOP, ENAMETOOLONG, a NUL
 * byte's TypeError...). The model gets the path it asked for and a plain reason instead; the
 * original error stays as `cause` for the host's logs. Our own typed errors pass through.
 */
export function fileProblem(error: unknown, requested: string): unknown {
  if (error instanceof FileToolError || error instanceof PathOutsideRootError) return error;
  const code = error instanceof Error ? (error as NodeJS.ErrnoException).code : undefined;
  const problem = typeof code === 'string' ? (PROBLEMS.get(code) ?? `file-system error ${code}`) : 'file-system error';
  return new FileToolError(requested, problem, { cause: error });
}
