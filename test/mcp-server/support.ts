import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ElicitRequestSchema, type ElicitResult } from '@modelcontextprotocol/sdk/types.js';

export const STDIO_SERVER = fileURLToPath(new URL('./fixtures/stdio-server.ts', import.meta.url));

export function scratchDir(): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'loopchart-mcp-server-'));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * An SDK client; with `answer` it declares form elicitation and answers each approval with it
 * (what a person clicks in Claude Desktop's dialog), and records the questions it was asked.
 */
export function client(answer?: (message: string) => ElicitResult): { client: Client; asked: string[] } {
  const asked: string[] = [];
  const made = new Client({ name: 'test-client', version: '1' }, answer ? { capabilities: { elicitation: { form: {} } } } : {});
  if (answer) {
    made.setRequestHandler(ElicitRequestSchema, (request) => {
      asked.push(request.params.message);
      return answer(request.params.message);
    });
  }
  return { client: made, asked };
}

/** Waits until `check` holds, polling every 20 ms, at most `ms`. */
export async function until(check: () => boolean | Promise<boolean>, ms = 10_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return check();
}
