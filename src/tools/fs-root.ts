import { realpath } from 'node:fs/promises';
import path from 'node:path';
import { FileToolError, PathOutsideRootError } from './errors.js';

/**
 * Resolves `requested` (relative to `root`, or absolute) to a real path inside the real root, or
 * throws PathOutsideRootError. Symlinks are followed as far as the path exists, so a link inside
 * the root that points outside it is refused too; a path that does not exist yet (a file to write)
 * is judged by its nearest existing ancestor.
 *
 * This guards against a model's mistakes and curiosity, not against a hostile process racing to
 * swap directories for symlinks between this check and the use of the path.
 */
export async function resolveInRoot(root: string, requested: string): Promise<string> {
  const realRoot = await realpath(root);
  const target = path.resolve(realRoot, requested);
  if (!isInside(realRoot, target)) throw new PathOutsideRootError(requested);

  const missing: string[] = [];
  let existing = target;
  let real = await realpathIfExists(existing);
  while (real === undefined) {
    missing.unshift(path.basename(existing));
    existing = path.dirname(existing);
    real = await realpathIfExists(existing);
  }
  const resolved = path.join(real, ...missing);
  if (!isInside(realRoot, resolved)) throw new PathOutsideRootError(requested);
  return resolved;
}

function isInside(root: string, candidate: string): boolean {
  const relative = path.relative(root, candidate);
  return relative === '' || (relative !== '..' && !relative.startsWith(`..${path.sep}`) && !path.isAbsolute(relative));
}

async function realpathIfExists(p: string): Promise<string | undefined> {
  try {
    return await realpath(p);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

const PROBLEMS: Record<string, string> = {
  ENOENT: 'no such file or directory',
  ENOTDIR: 'not a directory',
  EISDIR: 'is a directory',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
};

/**
 * Node's fs messages carry the absolute host path; the model gets the path it asked for instead.
 * Errors with no plain wording pass through unchanged.
 */
export function fileProblem(error: unknown, requested: string): unknown {
  const code = error instanceof Error ? (error as NodeJS.ErrnoException).code : undefined;
  const problem = code === undefined ? undefined : PROBLEMS[code];
  return problem ? new FileToolError(requested, problem, { cause: error }) : error;
}
