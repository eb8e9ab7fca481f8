/**
 * Errors in one place: every error class in src/ is exported from a public entry, every code is
 * in the one `ERROR_CODES` list, and `isInstance` recognises an error from another copy of the
 * package (ESM and CommonJS builds are two copies in one process) where `instanceof` cannot.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as root from '../../src/index.js';
import * as sqlite from '../../src/sqlite.js';
import * as postgres from '../../src/postgres.js';
import * as aiSdk from '../../src/ai-sdk.js';
import * as testing from '../../src/testing.js';
import * as mcp from '../../src/mcp.js';
import * as viewer from '../../src/viewer.js';
import * as http from '../../src/http.js';
import * as schemas from '../../src/schemas-entry.js';
import * as mcpServer from '../../src/mcp-server.js';
import * as schedules from '../../src/schedules.js';
import * as memory from '../../src/memory.js';
import * as evals from '../../src/evals.js';

const SRC = fileURLToPath(new URL('../../src', import.meta.url));
const entries: Record<string, Record<string, unknown>> = { loopchart: root, 'loopchart/sqlite': sqlite, 'loopchart/postgres': postgres, 'loopchart/ai-sdk': aiSdk, 'loopchart/testing': testing, 'loopchart/mcp': mcp, 'loopchart/viewer': viewer, 'loopchart/http': http, 'loopchart/schemas': schemas, 'loopchart/mcp-server': mcpServer, 'loopchart/schedules': schedules, 'loopchart/memory': memory, 'loopchart/evals': evals };

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sourceFiles(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
  );
}

/** `class X extends Y` across src/, as name -> parent. */
function errorClasses(): Map<string, { parent: string; file: string; codes: string[] }> {
  const classes = new Map<string, { parent: string; file: string; codes: string[] }>();
  for (const file of sourceFiles(SRC)) {
    const text = readFileSync(file, 'utf8');
    for (const match of text.matchAll(/class (\w+) extends (\w+) \{([\s\S]*?)\n\}/g)) {
      const codes = [...match[3]!.matchAll(/super\(\s*'(\w+)'/g)].map((m) => m[1]!);
      classes.set(match[1]!, { parent: match[2]!, file: relative(SRC, file), codes });
    }
  }
  return classes;
}

describe('errors in one place', () => {
  const classes = errorClasses();
  const isLoopchartError = (name: string): boolean => {
    for (let c: string | undefined = name; c; c = classes.get(c)?.parent) if (c === 'LoopchartError') return true;
    return false;
  };
  const thrown = [...classes.keys()].filter((name) => name !== 'LoopchartError' && isLoopchartError(name));

  it('finds the error classes it checks', () => {
    expect(thrown.length).toBeGreaterThanOrEqual(20);
    expect(thrown).toContain('SessionBusyError');
  });

  it('every LoopchartError subclass in src/ is exported from a public entry, as the same class', () => {
    const missing = thrown.filter((name) => !Object.values(entries).some((entry) => typeof entry[name] === 'function'));
    expect(missing, `not exported: ${missing.map((n) => `${n} (${classes.get(n)!.file})`).join(', ')}`).toEqual([]);
    for (const name of thrown) {
      const found = Object.values(entries).flatMap((entry) => (entry[name] ? [entry[name]] : []));
      expect(new Set(found).size, name).toBe(1);
    }
  });

  it('every code a class passes to LoopchartError is in ERROR_CODES, and the list has no duplicates', () => {
    const codes = thrown.flatMap((name) => (classes.get(name)!.parent === 'LoopchartError' ? classes.get(name)!.codes : []));
    expect(codes.length).toBeGreaterThanOrEqual(15);
    for (const code of codes) expect(root.ERROR_CODES).toContain(code);
    expect(new Set(root.ERROR_CODES).size).toBe(root.ERROR_CODES.length);
  });

  it('no class in src/ extends Error directly except LoopchartError (the CLI keeps its own)', () => {
    const direct = [...classes].filter(([name, c]) => c.parent === 'Error' && name !== 'LoopchartError' && !c.file.startsWith('cli'));
    expect(direct.map(([name]) => name)).toEqual([]);
  });

  it('isInstance recognises an error from another copy of the module, where instanceof does not', async () => {
    // A second instance of the same modules, as the CommonJS build beside the ESM one would be.
    // @ts-expect-error: the query string makes vitest load a fresh instance; TypeScript knows no such file.
    const copy = (await import('../../src/stores/errors.js?second-copy')) as typeof import('../../src/stores/errors.js');
    const foreign = new copy.SessionBusyError('s', 1, 2);
    expect(foreign instanceof root.SessionBusyError).toBe(false);
    expect(root.SessionBusyError.isInstance(foreign)).toBe(true);
    expect(root.LoopchartError.isInstance(foreign)).toBe(true);
    expect(root.SessionNotFoundError.isInstance(foreign)).toBe(false);
    expect(root.LoopchartError.isInstance(new Error('plain'))).toBe(false);
    expect(root.LoopchartError.isInstance({ code: 'SessionBusy', message: 'a look-alike' })).toBe(false);
    // Subclasses of subclasses: a ReadTimeoutError is a ModelError.
    const timeout = new root.ReadTimeoutError(5);
    expect(root.ModelError.isInstance(timeout)).toBe(true);
    expect(root.ReadTimeoutError.isInstance(new root.ModelError('x', { retryable: false }))).toBe(false);
  });
});
