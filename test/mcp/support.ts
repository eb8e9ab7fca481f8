import { mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const FIXTURE_SERVER = fileURLToPath(new URL('./fixtures/server.mjs', import.meta.url));
export const FIXTURE_FOLDER = fileURLToPath(new URL('./fixtures/folder', import.meta.url));
export const FILESYSTEM_SERVER = fileURLToPath(
  new URL('../../node_modules/@modelcontextprotocol/server-filesystem/dist/index.js', import.meta.url),
);

/** A scratch directory and the fixture server's event log in it. */
export function scratch() {
  const dir = mkdtempSync(join(tmpdir(), 'loopchart-mcp-'));
  const logFile = join(dir, 'events.jsonl');
  return {
    dir,
    logFile,
    /** The events the fixture server logged so far. */
    events(): Record<string, unknown>[] {
      if (!existsSync(logFile)) return [];
      return readFileSync(logFile, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Record<string, unknown>);
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** The fixture server as an `mcpTools` stdio server. */
export const fixtureServer = (env: Record<string, string> = {}) => ({ command: process.execPath, args: [FIXTURE_SERVER], env });

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Running, and not a zombie waiting to be reaped (a killed process whose parent is gone may stay one a while). */
export function running(pid: number): boolean {
  if (!alive(pid)) return false;
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** Polls until `check` holds, at most `ms`. */
export async function eventually(check: () => boolean, ms = 10_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return check();
}
