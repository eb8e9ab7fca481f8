/** examples/restate/run-local.ts does what its header says, and cleans up after itself. */
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { REPO } from './support/server.js';
import { SERVER_BINARY } from './support/suite.js';

const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
const exampleDirs = () => readdirSync(tmpdir()).filter((name) => name.startsWith('loopchart-restate-example-'));

describe.skipIf(!SERVER_BINARY)('examples/restate', () => {
  it('run-local.ts starts a server and a worker, drives three sessions (one approved), and stops everything', async () => {
    const before = new Set(exampleDirs());
    const child = spawn(process.execPath, ['--import', TSX, join(REPO, 'examples/restate/run-local.ts')], {
      cwd: REPO,
      env: { ...process.env, TSX_TSCONFIG_PATH: join(REPO, 'tsconfig.json'), LOOPCHART_RESTATE_SERVER: SERVER_BINARY },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(0);
    expect(stdout.trim().split('\n')).toEqual([
      'alice: Completed: Done: 7 words.',
      'bob: Completed: Done: 5 words.',
      'carol: waiting for approval of deploy',
      'carol: Completed: Done: web deployed (key carol:run-1:turn-1:tools:call-1).',
      'carol: 4 messages stored, 2 turns',
    ]);
    expect(exampleDirs().filter((name) => !before.has(name))).toEqual([]);
  });
});
