/**
 * `npm run example:chat` as a user runs it: a child process that builds the page with Vite,
 * serves it and the chat handler on 127.0.0.1 and prints the URL. The page is HTML with its
 * script; a chat message streams back as a UI message stream (read by the AI SDK 6 transport)
 * with text and the approval request, the approval runs the tool, and Stop's cancel request
 * ends a long answer Cancelled.
 */
import { DefaultChatTransport, readUIMessageStream, type UIMessage } from 'ai-v6';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startChatExample, stopChatExample, type ChatExample } from '../support/chat-example.js';

let example: ChatExample | undefined;
let url = '';

beforeAll(async () => {
  example = await startChatExample();
  url = example.url;
}, 70_000);

afterAll(() => stopChatExample(example));

const userMessage = (text: string, id: string) => ({ id, role: 'user' as const, parts: [{ type: 'text' as const, text }] });

async function send(chatId: string, messages: UIMessage[], message?: UIMessage, onStream?: () => void): Promise<UIMessage> {
  const transport = new DefaultChatTransport({ api: `${url}api/chat` });
  const stream = await transport.sendMessages({ chatId, messages, trigger: 'submit-message', messageId: undefined, abortSignal: undefined });
  onStream?.();
  let last: UIMessage | undefined;
  for await (const m of readUIMessageStream({ stream, ...(message && { message: structuredClone(message) }) })) last = m;
  return last!;
}

const text = (message: UIMessage) => message.parts.flatMap((part) => (part.type === 'text' ? [part.text] : [])).join('|');

describe('examples/chat-ui (npm run example:chat)', () => {
  it('serves the built page: HTML whose module script is there', async () => {
    const page = await fetch(url);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await page.text();
    const script = /<script type="module"[^>]* src="([^"]+)"/.exec(html)?.[1];
    expect(script).toMatch(/^\/assets\/.+\.js$/);
    const js = await fetch(new URL(script!, url));
    expect(js.status).toBe(200);
    expect(await js.text()).toContain('/cancel');
    expect((await fetch(new URL('/../../package.json', url))).status).toBe(404);
  });

  it('answers only to its own name: a rebound hostile name (its own Host and Origin) is refused before the chat handler runs', async () => {
    const { request } = await import('node:http');
    const post = (headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        const body = JSON.stringify({ id: 'rebound', messages: [userMessage('Send 5 to Mallory.', 'r1')] });
        const req = request({ host: '127.0.0.1', port: example!.port, path: '/api/chat', method: 'POST', headers: { 'content-type': 'application/json', ...headers } }, (res) => (res.resume(), resolve(res.statusCode!)));
        req.on('error', reject);
        req.end(body);
      });
    // Before: 200, and the agent ran for the page of evil.test.
    expect(await post({ host: `evil.test:${example!.port}`, origin: `http://evil.test:${example!.port}` })).toBe(421);
    expect(await post({ host: `127.0.0.1:${example!.port}`, origin: 'http://evil.test' })).toBe(403);
    // Nothing ran: no chat of that id was made.
    expect((await fetch(`${url}api/chat/rebound/messages`)).status).toBe(404);
  });

  it('a message streams text and an approval request; approving runs the tool and the run completes', async () => {
    const user = userMessage('Send 5 to Alice.', 'u1');
    const asked = await send('money', [user]);
    expect(text(asked)).toBe('I will ask you first.');
    const part = asked.parts.find((p) => p.type === 'tool-transfer') as { state: string; approval: { id: string } } | undefined;
    expect(part?.state).toBe('approval-requested');
    const answered = { ...asked, parts: asked.parts.map((p) => (p === (part as unknown) ? { ...p, state: 'approval-responded', approval: { id: part!.approval.id, approved: true } } : p)) } as UIMessage;
    const after = await send('money', [user, answered], answered);
    expect(after.parts.find((p) => p.type === 'tool-transfer')).toMatchObject({ state: 'output-available', output: 'sent 5' });
    expect(text(after)).toBe('I will ask you first.|Done: see the tool result above.');
    expect((after.metadata as { outcome: string }).outcome).toBe('Completed');
  });

  it("Stop's cancel request ends a long answer Cancelled", async () => {
    const started = Date.now();
    let cancelled: Promise<Response> | undefined;
    const story = await send('story', [userMessage('Tell me a story.', 'u1')], undefined, () => {
      cancelled = new Promise((resolve) => setTimeout(resolve, 300)).then(() => fetch(`${url}api/chat/story/cancel`, { method: 'POST' }));
    });
    expect((await cancelled!).status).toBe(202);
    expect((story.metadata as { outcome: string }).outcome).toBe('Cancelled');
    expect(Date.now() - started).toBeLessThan(4500);
  });
});
