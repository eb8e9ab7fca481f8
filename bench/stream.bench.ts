/**
 * Streaming overhead per chunk: the HTTP adapter (SSE parser + chunk assembler + read-timer
 * refresh + abort plumbing) against a minimal hand-written loop (split on "\n\n", JSON.parse,
 * concatenate deltas) reading the very same bytes. Also the AI SDK adapter over
 * `@ai-sdk/openai-compatible` for scale: V2 (AI SDK 5, openai-compatible@1) and V3 (AI SDK 6,
 * openai-compatible@2), the V3 row also as a ratio to V2 (its finish part is checked with zod
 * and its usage read from the nested shape; the per-chunk path is the provider's).
 *
 * Three feeds of one recorded ~5,000-chunk stream (text deltas plus two tool calls whose
 * arguments arrive in pieces):
 * - replay, 1 frame/read: every SSE frame in its own read, like a provider flushing each token;
 *   the worst case for per-chunk overhead and the purest parser comparison;
 * - replay, as recorded: the reads exactly as they came off the local socket (coalesced);
 * - local HTTP: a real request to the local chat server each run (server time included in both).
 */
import { pathToFileURL } from 'node:url';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { createOpenAICompatible as createOpenAICompatibleV3 } from 'ai-sdk-openai-compatible-v2';
import type { Model, ModelRequest } from '../src/model.js';
import { aiSdkModel } from '../src/models/ai-sdk.js';
import { openAICompatibleModel } from '../src/models/openai-compatible.js';
import { replyFrames, startChatServer, TEST_MODEL, type ReplyScript } from '../test/support/chat-server.js';
import { medianOfAsync, printTable } from './support.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 15);
const TEXT_CHUNKS = 4_900;
const words = ['The', ' quick', ' brown', ' fox', ' jumps', ' over', ' the', ' lazy', ' dog', '.', ' Ünïcödé', ' ✓'];
const script: ReplyScript = {
  text: Array.from({ length: TEXT_CHUNKS }, (_, i) => words[i % words.length]!),
  toolCalls: [
    { id: 'call_a', name: 'search', arguments: { query: 'x'.repeat(400), limit: 10 } },
    { id: 'call_b', name: 'search', arguments: { query: 'y'.repeat(400), limit: 20 } },
  ],
  argumentPieces: 45,
};
const expectedText = script.text!.join('');

const request = (): ModelRequest => ({
  messages: [{ role: 'user', content: 'go' }],
  tools: [],
  signal: new AbortController().signal,
  idempotencyKey: 'bench',
});

/** The minimal loop someone writes inline: what the adapter's extra care is measured against. */
async function rawLoop(response: Response): Promise<{ text: string; chunks: number }> {
  const decoder = new TextDecoder();
  const args = new Map<number, string>();
  let buffer = '';
  let text = '';
  let chunks = 0;
  for await (const bytes of response.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(bytes, { stream: true });
    const frames = buffer.split('\n\n');
    buffer = frames.pop()!;
    for (const frame of frames) {
      if (!frame.startsWith('data: ')) continue;
      const data = frame.slice(6);
      if (data === '[DONE]') return { text, chunks };
      const chunk = JSON.parse(data) as {
        choices: { delta?: { content?: string | null; tool_calls?: { index: number; function?: { arguments?: string } }[] } }[];
      };
      chunks++;
      const delta = chunk.choices[0]?.delta;
      if (delta?.content) text += delta.content;
      for (const call of delta?.tool_calls ?? []) args.set(call.index, (args.get(call.index) ?? '') + (call.function?.arguments ?? ''));
    }
  }
  return { text, chunks };
}

function replayFetch(reads: readonly Uint8Array[]): typeof fetch {
  return async () => {
    let i = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (i < reads.length) controller.enqueue(reads[i++]!);
        else controller.close();
      },
    });
    return new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream' } });
  };
}

async function timeMs(fn: () => Promise<void>): Promise<number> {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

function check(text: string, who: string): void {
  if (text !== expectedText) throw new Error(`${who} assembled the wrong text (${text.length} chars)`);
}

export async function run(): Promise<void> {
  const server = await startChatServer();
  try {
    const frames = replyFrames(script, TEST_MODEL);
    const dataChunks = frames.length - 1; // every frame is a JSON chunk except [DONE]

    // Record the stream once, as the socket delivered it.
    server.enqueue({ type: 'frames', frames });
    const recorded: Uint8Array[] = [];
    const res = await fetch(`${server.baseURL}/chat/completions`, { method: 'POST', body: '{}' });
    for await (const bytes of res.body as unknown as AsyncIterable<Uint8Array>) recorded.push(bytes);
    const encoder = new TextEncoder();
    const perFrame = frames.map((f) => encoder.encode(f));
    const totalBytes = recorded.reduce((n, b) => n + b.length, 0);

    const feeds: Array<{ name: string; fetch: () => typeof fetch }> = [
      { name: `replay, 1 frame/read (${perFrame.length} reads)`, fetch: () => replayFetch(perFrame) },
      { name: `replay, as recorded (${recorded.length} reads)`, fetch: () => replayFetch(recorded) },
      {
        name: 'local HTTP',
        fetch: () => (input, init) => {
          server.enqueue({ type: 'frames', frames });
          return fetch(input, init);
        },
      },
    ];

    const rows: (string | number)[][] = [];
    for (const feed of feeds) {
      const url = `${server.baseURL}/chat/completions`;
      const raw = await medianOfAsync(RUNS, () =>
        timeMs(async () => {
          const response = await feed.fetch()(url, { method: 'POST', body: '{}' });
          const out = await rawLoop(response);
          check(out.text, 'raw loop');
        }),
      );
      const adapters: Array<[string, Model]> = [
        ['openAICompatibleModel', openAICompatibleModel({ baseURL: server.baseURL, model: TEST_MODEL, fetch: feed.fetch() })],
        [
          'aiSdkModel(V2, openai-compatible@1)',
          aiSdkModel(createOpenAICompatible({ name: 'bench', baseURL: server.baseURL, includeUsage: true, fetch: feed.fetch() }).chatModel(TEST_MODEL)),
        ],
        [
          'aiSdkModel(V3, openai-compatible@2)',
          aiSdkModel(createOpenAICompatibleV3({ name: 'bench', baseURL: server.baseURL, includeUsage: true, fetch: feed.fetch() }).chatModel(TEST_MODEL)),
        ],
      ];
      rows.push([feed.name, 'raw fetch + split/JSON.parse', raw, (raw * 1000) / dataChunks, '1.00x', '']);
      let v2 = 0;
      for (const [name, model] of adapters) {
        const ms = await medianOfAsync(RUNS, () =>
          timeMs(async () => {
            const reply = await model.generate(request());
            check(reply.message.content, name);
            if (reply.message.toolCalls?.length !== 2) throw new Error(`${name} lost tool calls`);
          }),
        );
        if (name.startsWith('aiSdkModel(V2')) v2 = ms;
        const vsV2 = name.startsWith('aiSdkModel(V3') ? `${(ms / v2).toFixed(2)}x` : '';
        rows.push(['', name, ms, (ms * 1000) / dataChunks, `${(ms / raw).toFixed(2)}x`, vsV2]);
      }
    }
    printTable(
      `stream: one reply of ${dataChunks.toLocaleString('en-US')} chunks (${(totalBytes / 1024).toFixed(0)} KiB), median of ${RUNS} runs`,
      ['feed', 'parser', 'ms / stream', 'µs / chunk', 'vs raw', 'vs V2'],
      rows,
    );
  } finally {
    await server.close();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await run();
