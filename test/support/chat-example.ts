/**
 * `npm run example:chat` as a child process (examples/chat-ui/server.ts run with tsx): it builds
 * the page with Vite, serves it and the chat handler on 127.0.0.1 and prints its URL. Shared by
 * the example's HTTP test and the browser test that clicks through the same page.
 */
import { fileURLToPath } from 'node:url';
import { startNode, tsxCommand, type RunningChild } from '../sessions/fixtures/processes.js';

const SERVER = fileURLToPath(new URL('../../examples/chat-ui/server.ts', import.meta.url));

export interface ChatExample {
  /** The page's URL, `http://127.0.0.1:<port>/`. */
  url: string;
  port: number;
  child: RunningChild;
}

export interface ChatExampleOptions {
  /** `--data DIR`: the store and page stay in DIR, so a restarted server finds the chats. */
  data?: string;
  /** 0 (the default) picks a free port. */
  port?: number;
  /** Each line the server prints (the example's `transfer N`, for one). */
  onLine?(line: string): void;
  /** How long the server may live (default 10 minutes) and how long its build may take (60 s). */
  lifetimeMs?: number;
  startMs?: number;
}

/** Starts the example and resolves once it prints its URL; rejects if it exits or takes too long. */
export async function startChatExample(options: ChatExampleOptions = {}): Promise<ChatExample> {
  const { args } = tsxCommand(SERVER);
  const startMs = options.startMs ?? 60_000;
  let child!: RunningChild;
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the chat example printed no URL within ${startMs} ms: ${child.lines.join(' | ')}`)), startMs);
    child = startNode([...args, ...(options.data === undefined ? [] : ['--data', options.data])], {
      env: { PORT: String(options.port ?? 0) },
      timeoutMs: options.lifetimeMs ?? 600_000,
      onLine: (line) => {
        const found = /chat UI at (http:\/\/127\.0\.0\.1:\d+\/)/.exec(line)?.[1];
        if (found) {
          clearTimeout(timer);
          resolve(found);
        }
        options.onLine?.(line);
      },
    });
    child.done.then(
      (run) => reject(new Error(`the chat example exited (${run.code ?? run.signal}): ${run.stderr}`)),
      reject,
    );
  });
  return { url, port: Number(new URL(url).port), child };
}

/** Stops the example with SIGTERM (it removes its temporary folder), SIGKILL after 5 s. */
export async function stopChatExample(example: ChatExample | undefined): Promise<void> {
  if (!example) return;
  const exited = example.child.done.catch(() => undefined);
  try {
    process.kill(example.child.pid, 'SIGTERM');
  } catch {
    return; // already gone
  }
  const timer = setTimeout(() => example.child.kill(), 5000);
  await exited;
  clearTimeout(timer);
}
