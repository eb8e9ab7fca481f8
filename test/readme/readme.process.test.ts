/**
 * Every TypeScript block in README.md and in docs/**\/*.md is a file under examples/ (its first
 * line names it; examples/readme/ holds the guides' own): the test keeps the two identical, `npm run typecheck` type-checks the
 * files (they import `loopchart` by name, mapped to src/ by tsconfig `paths`), and this test runs
 * each one and checks the output its `console.log(...) // expected` comments promise. A snippet
 * moved from the README into a guide stays checked and run.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startChatServer } from '../support/chat-server.js';
import { REPO, userMarkdown } from '../docs/markdown.js';
import { bundledCommands, type NodeCommand } from '../sessions/fixtures/processes.js';

const pages = userMarkdown();
const readme = pages.find((page) => page.path === 'README.md')!.text;
const docs = pages.filter((page) => page.path !== 'README.md');
/** Every ```ts block with the page it is on. */
const blocks = pages.flatMap((page) => [...page.text.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => ({ page: page.path, block: m[1]! })));
const snippetDir = join(REPO, 'examples', 'readme');
const snippets = readdirSync(snippetDir).map((file) => `examples/readme/${file}`);
const cwd = mkdtempSync(join(tmpdir(), 'loopchart-readme-'));
/**
 * The snippets from one bundle build (see bundledCommands: a third of tsx's start-up CPU each,
 * their shared code built once); `loopchart` resolves to src/ through tsconfig's paths, as tsx
 * resolves it with TSX_TSCONFIG_PATH (kept for LOOPCHART_TEST_TSX=1, which runs them through tsx).
 */
const commands = new Map<string, NodeCommand>();
beforeAll(async () => {
  const built = await bundledCommands(snippets.map((file) => join(REPO, file)));
  snippets.forEach((file, i) => commands.set(file, built[i]!));
});
afterAll(() => {
  for (const command of commands.values()) command.dispose();
  rmSync(cwd, { recursive: true, force: true });
});

/** The file a block shows: one under examples/ (examples/readme/ holds the guides' own, run below; others run in their own tests). */
const pathOf = (block: string) => /^\/\/ (examples\/[\w/-]+\.tsx?)\n/.exec(block)?.[1];

function run(file: string, env: Record<string, string>, dir = cwd): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const base: NodeJS.ProcessEnv = { ...process.env, TSX_TSCONFIG_PATH: join(REPO, 'tsconfig.json'), ...env };
  for (const name of ['OPENAI_API_KEY', 'LOOPCHART_STORE', ...(env.OPENAI_BASE_URL ? [] : ['OPENAI_BASE_URL'])]) delete base[name];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, commands.get(file)!.args, { cwd: dir, env: base, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${file} did not finish within 30 s\n${stdout}\n${stderr}`));
    }, 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('README and docs snippets', () => {
  it('every TypeScript block names its file on its first line, and the file is the block, byte for byte', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(23);
    for (const { page, block } of blocks) {
      const path = pathOf(block);
      expect(path, `a block without its file in ${page}:\n${block.slice(0, 200)}`).toBeDefined();
      // A file under examples/readme/ starts with its own name; another example may leave it to the guide.
      const file = readFileSync(join(REPO, path!), 'utf8');
      expect(file.startsWith(`// ${path}\n`) ? file : `// ${path}\n${file}`, `${page}: ${path}`).toBe(block);
    }
  });

  it('no block imports by a path out of its own folder (`../../src/evals.js`): a reader copies it into a project that has the package, not this repository', () => {
    const outside = blocks.flatMap(({ page, block }) => [...block.matchAll(/from '(\.\.\/[^']*)'/g)].map((m) => `${page}: ${pathOf(block)}: ${m[1]}`));
    expect(outside).toEqual([]);
  });

  it('code is fenced as ts, so none escapes the check (no typescript, tsx, js, javascript, mjs or mts fences)', () => {
    for (const page of pages) expect(page.text.match(/^```(typescript|tsx|jsx?|javascript|[mc][jt]s)\b.*$/gm) ?? [], page.path).toEqual([]);
  });

  it('every file in examples/readme/ is shown in the README or a guide under docs/', () => {
    const shown = new Set(blocks.map(({ block }) => pathOf(block)));
    for (const file of readdirSync(snippetDir)) expect(shown, file).toContain(`examples/readme/${file}`);
  });

  it.each(snippets)('%s runs and prints what its comments say', async (file) => {
    const env: Record<string, string> = {};
    const server = file.endsWith('real-model.ts') ? await startChatServer() : undefined;
    if (server) {
      server.enqueue({ type: 'reply', text: ['Hello from HTTP.'] }, { type: 'reply', text: ['Hello from the AI SDK.'] });
      env.OPENAI_BASE_URL = server.baseURL;
    }
    try {
      const result = await run(file, env);
      expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0);
      const source = readFileSync(join(REPO, file), 'utf8');
      const promised = [...source.matchAll(/console\.log\(.*\); \/\/ (.+)$/gm)].map((m) => m[1]!);
      for (const text of promised) expect(result.stdout, file).toContain(text);
      if (server) {
        expect(result.stdout).toContain('Completed Hello from HTTP.');
        expect(result.stdout).toContain('Completed Hello from the AI SDK.');
      }
    } finally {
      await server?.close();
    }
  });
});

/** The snippets that keep what they store in a file of the folder they run in (a reader runs them again there). */
const storing = snippets.filter((file) => /^(?!\s*\/\/).*openSessionStore\((?!'memory:')/m.test(readFileSync(join(REPO, file), 'utf8')));

describe('README and docs snippets, run again', () => {
  it.each(storing)('%s ends a second run in the same folder, and prints what its comments say again', { timeout: 90_000 }, async (file) => {
    expect(storing.length).toBeGreaterThanOrEqual(1);
    const dir = mkdtempSync(join(tmpdir(), 'loopchart-readme-again-'));
    try {
      const promised = [...readFileSync(join(REPO, file), 'utf8').matchAll(/console\.log\(.*\); \/\/ (.+)$/gm)].map((m) => m[1]!);
      for (const attempt of [1, 2]) {
        const result = await run(file, {}, dir);
        expect(result.code, `run ${attempt}: ${result.stdout}\n${result.stderr}`).toBe(0);
        for (const text of promised) expect(result.stdout, `run ${attempt}`).toContain(text);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('README and docs wording for users', () => {
  it('cites no internal spec seed ("seed 003"): users have no seeds to look up', () => {
    for (const page of pages) expect(page.text, page.path).not.toMatch(/\bseeds?\b/i);
  });

  it('says that the AI SDK under strict tsc needs @types/json-schema, and how to install it', () => {
    const aiSdk = docs.find((page) => page.path === 'docs/integrations/ai-sdk.md')!.text;
    expect(aiSdk).toContain('npm install --save-dev @types/json-schema');
    expect(aiSdk).toMatch(/AI SDK 6[\s\S]{0,200}`@types\/json-schema`/);
  });

  it('the README\'s install table names every entry point of package.json "exports"', () => {
    const manifest = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
    const rows = readme.split('\n').filter((line) => line.startsWith('| `loopchart'));
    for (const subpath of Object.keys(manifest.exports).filter((path) => path !== './package.json')) {
      const specifier = subpath === '.' ? 'loopchart' : `loopchart/${subpath.slice(2)}`;
      expect(rows.some((row) => row.startsWith(`| \`${specifier}\` |`)), specifier).toBe(true);
    }
  });

  it('the README is a front page: at most 300 lines, with the two commands a newcomer runs and the Quickstart', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(300);
    expect(readme).toContain('npm ci && npm start');
    expect(readme).toMatch(/^npm test\b/m);
    expect(readme).toContain('// examples/readme/quickstart.ts');
  });
});
