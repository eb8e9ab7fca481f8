/**
 * `npm run example:chat`: builds the chat page with Vite into a temporary folder, then serves it
 * and loopchart's chat handler (/api/chat, a SQLite store in the same folder) on 127.0.0.1, port
 * $PORT or any free one, and prints the URL. Ctrl+C (or SIGTERM) stops it and removes the folder.
 * With `--data DIR` the store and the page live in DIR and stay: chats survive a restart, and a
 * page open across the restart finishes the answer it was showing.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, extname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'vite';
import { createChatHandler, toNodeListener } from '../../src/http.js';
import { SqliteSessionStore } from '../../src/sqlite.js';
import { localRequestProblem } from '../../src/viewer/http.js';
import { exampleMachine } from './agent.js';

const port = Number(process.env.PORT ?? 0);
if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`PORT must be a port number, not '${process.env.PORT}'`);

const { values } = parseArgs({ options: { data: { type: 'string' } } });
const kept = values.data !== undefined;
const work = values.data !== undefined ? resolve(values.data) : mkdtempSync(join(tmpdir(), 'loopchart-chat-ui-'));
mkdirSync(work, { recursive: true });
const dist = join(work, 'page');
/**
 * The page imports `ai` as an app would. This repository's own `ai` dependency is AI SDK 5 (its
 * tests speak every version), so the build resolves `ai` to the copy `@ai-sdk/react` itself uses
 * (AI SDK 6): one `ai` in the bundle, the one an app installing `@ai-sdk/react` 3 gets.
 */
const reactRequire = createRequire(createRequire(import.meta.url).resolve('@ai-sdk/react'));
const ai = dirname(reactRequire.resolve('ai/package.json'));
await build({
  root: fileURLToPath(new URL('.', import.meta.url)),
  configFile: false,
  logLevel: 'error',
  resolve: { alias: [{ find: /^ai$/, replacement: ai }] },
  build: { outDir: dist, emptyOutDir: true },
});

const store = new SqliteSessionStore({ path: join(work, 'chat.db') });
const chat = createChatHandler({ machine: exampleMachine(), store });
const api = toNodeListener(chat);
const types = new Map([['.html', 'text/html; charset=utf-8'], ['.js', 'text/javascript'], ['.css', 'text/css']]);

const server = createServer((req, res) => {
  // A server on 127.0.0.1 with no authorize hook answers only to its own name: a hostile page
  // whose name the attacker points at 127.0.0.1 (DNS rebinding) sends its own Host and Origin,
  // and would otherwise chat with the agent (on your model key) and read the chats. Behind a
  // proxy or on a real host, give createChatHandler an `authorize` instead.
  const refused = localRequestProblem(req.headers, (server.address() as { port: number }).port, req.rawHeaders);
  if (refused) return void res.writeHead(refused.status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: refused.code, message: refused.reason }));
  const path = new URL(req.url ?? '/', 'http://127.0.0.1').pathname;
  if (path === '/api/chat' || path.startsWith('/api/chat/')) return api(req, res);
  // The built page only: a path out of its folder is a 404.
  const file = join(dist, path === '/' ? 'index.html' : decodeURIComponent(path));
  if (!file.startsWith(dist + sep)) return void res.writeHead(404).end();
  readFile(file).then(
    (body) => res.writeHead(200, { 'content-type': types.get(extname(file)) ?? 'application/octet-stream' }).end(body),
    () => res.writeHead(404).end(),
  );
});
server.listen(port, '127.0.0.1', () => console.log(`chat UI at http://127.0.0.1:${(server.address() as { port: number }).port}/`));

let stopping = false;
const stop = () => {
  if (stopping) process.exit(130);
  stopping = true;
  server.close();
  server.closeAllConnections();
  void chat
    .close()
    .then(() => store.close())
    .finally(() => {
      if (!kept) rmSync(work, { recursive: true, force: true });
      process.exit(0);
    });
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
