import { MissingPackageError } from './errors.js';

/**
 * True when `error` is the module loader saying `packageName` is not installed: ESM names the
 * package ("Cannot find package 'pg'"), CommonJS the path asked for ("Cannot find module
 * '@modelcontextprotocol/sdk/client/index.js'").
 */
export function isMissingPackage(error: unknown, packageName: string): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') return false;
  return typeof message === 'string' && [`'${packageName}'`, `"${packageName}"`, `'${packageName}/`, `"${packageName}/`].some((quoted) => message.includes(quoted));
}

/**
 * What loading `feature` threw, as the user should read it: a `MissingPackageError` naming the
 * optional peer package to install when the loader could not find one of `packages`, else the
 * error itself. The published entries that need a peer (`loopchart/postgres`, `/restate`, `/mcp`,
 * `/mcp-server`) load through this (scripts/peer-entries.ts writes them), so a missing `pg` is
 * one line with `npm install pg`, not the loader's ERR_MODULE_NOT_FOUND and its stack of paths.
 */
export function peerLoadError(error: unknown, feature: string, packages: readonly string[]): unknown {
  const missing = packages.find((name) => isMissingPackage(error, name));
  return missing === undefined ? error : new MissingPackageError(missing, feature, { cause: error });
}
