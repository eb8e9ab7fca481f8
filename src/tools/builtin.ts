import { constants } from 'node:fs';
import { mkdir, open, readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { evaluateExpression } from './arithmetic.js';
import { defineTool } from './define-tool.js';
import { FileToolError } from './errors.js';
import { fileProblem, resolveInRoot } from './fs-root.js';

/**
 * Ready-made tools. The file tools take paths relative to a root directory and refuse anything
 * that resolves outside it (PathOutsideRootError, which the runner turns into an error result the
 * model can read). They name paths as the model gave them, never as absolute host paths.
 */

const relativePath = z.string().min(1).describe('Path relative to the root directory, e.g. "notes/todo.md"');

export interface RootOptions {
  /** The directory the tool may touch, resolved against the working directory when the tool is made. */
  root: string;
}

/** Fails with the model's own path in the message rather than the host's. */
async function onPath<T>(requested: string, action: () => Promise<T>): Promise<T> {
  try {
    return await action();
  } catch (error) {
    throw fileProblem(error, requested);
  }
}

export const DirEntrySchema = z.object({
  name: z.string(),
  type: z.enum(['file', 'directory', 'symlink', 'other']),
  /** Bytes, for files. */
  size: z.number().int().nonnegative().optional(),
});
export type DirEntry = z.infer<typeof DirEntrySchema>;

export const DirListingSchema = z.object({
  path: z.string(),
  entries: z.array(DirEntrySchema),
  /** Entries left out beyond `maxEntries`. */
  omitted: z.number().int().positive().optional(),
});
export type DirListing = z.infer<typeof DirListingSchema>;

/** `list_dir`: a directory's entries as JSON (`DirListing`), sorted by name. */
export function listDirTool(options: RootOptions & { maxEntries?: number | undefined }) {
  const root = path.resolve(options.root);
  const maxEntries = options.maxEntries ?? 1000;
  return defineTool({
    name: 'list_dir',
    description:
      'List the entries of a directory: name, type (file, directory, symlink) and size in bytes for files. Returns JSON.',
    input: z.object({ path: relativePath.default('.') }),
    async execute({ path: requested }): Promise<DirListing> {
      return onPath(requested, async () => {
        const dir = await resolveInRoot(root, requested);
        const dirents = (await readdir(dir, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
        const shown = dirents.slice(0, maxEntries);
        const entries = await Promise.all(
          shown.map(async (dirent): Promise<DirEntry> => {
            if (dirent.isFile()) return { name: dirent.name, type: 'file', size: (await stat(path.join(dir, dirent.name))).size };
            if (dirent.isDirectory()) return { name: dirent.name, type: 'directory' };
            return { name: dirent.name, type: dirent.isSymbolicLink() ? 'symlink' : 'other' };
          }),
        );
        const omitted = dirents.length - shown.length;
        return omitted > 0 ? { path: requested, entries, omitted } : { path: requested, entries };
      });
    },
  });
}

/** `read_file`: a text file's content, cut at `maxBytes` (default 64 KiB) with a note saying so. */
export function readFileTool(options: RootOptions & { maxBytes?: number | undefined }) {
  const root = path.resolve(options.root);
  const maxBytes = options.maxBytes ?? 64 * 1024;
  return defineTool({
    name: 'read_file',
    description: `Read a UTF-8 text file. Files over ${maxBytes} bytes are cut off, with a note giving the full size.`,
    input: z.object({ path: relativePath }),
    async execute({ path: requested }): Promise<string> {
      return onPath(requested, async () => {
        const file = await resolveInRoot(root, requested);
        const info = await stat(file);
        // Checked before opening: opening a FIFO would block until something writes to it.
        if (info.isDirectory()) throw new FileToolError(requested, 'is a directory; use list_dir');
        if (!info.isFile()) throw new FileToolError(requested, 'not a regular file');
        const { size } = info;
        // Only the first maxBytes are read, so a huge file costs no more than a small one.
        // No link may appear between the check and the open: O_NOFOLLOW refuses one (ELOOP).
        const handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
        try {
          const buffer = Buffer.alloc(Math.min(size, maxBytes));
          const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
          const bytes = buffer.subarray(0, bytesRead);
          if (bytes.includes(0)) throw new FileToolError(requested, `binary file (${size} bytes), not shown`);
          // Streaming mode holds back a multi-byte character cut at the limit instead of mangling it.
          const text = new TextDecoder().decode(bytes, { stream: size > bytesRead });
          return size > bytesRead ? `${text}\n[truncated: showed the first ${bytesRead} of ${size} bytes]` : text;
        } finally {
          await handle.close();
        }
      });
    },
  });
}

/** `write_file`: creates or replaces a text file, creating missing parent directories inside the root. */
export function writeFileTool(options: RootOptions) {
  const root = path.resolve(options.root);
  return defineTool({
    name: 'write_file',
    description: 'Create or overwrite a UTF-8 text file with the given content. Missing parent directories are created.',
    input: z.object({ path: relativePath, content: z.string() }),
    async execute({ path: requested, content }): Promise<string> {
      return onPath(requested, async () => {
        const file = await resolveInRoot(root, requested);
        await mkdir(path.dirname(file), { recursive: true });
        // The resolved path holds no link; O_NOFOLLOW refuses one planted after the check.
        const handle = await open(file, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o666);
        try {
          await handle.writeFile(content, 'utf8');
        } finally {
          await handle.close();
        }
        return `wrote ${Buffer.byteLength(content, 'utf8')} bytes to ${requested}`;
      });
    },
  });
}

/** `calculator`: evaluates an arithmetic expression without eval (see `evaluateExpression`). */
export function calculatorTool() {
  return defineTool({
    name: 'calculator',
    description:
      'Evaluate an arithmetic expression exactly. Supports + - * / % ^ (power), parentheses, unary minus and decimals, e.g. "(1200 + 345) / 3".',
    input: z.object({ expression: z.string().min(1).max(1000) }),
    execute: ({ expression }): number => evaluateExpression(expression),
  });
}
