/**
 * The chat handler (loopchart/http, issue 23). Two tables:
 *
 * 1. Per-chunk cost of the stream conversion: a model text delta through the run's chunker, its
 *    log and a bounded response into a Fetch body, against writing the same `text-delta` chunk
 *    as raw SSE into the same body (the floor: one JSON.stringify and one Buffer per chunk).
 * 2. Time from a model delta to its chunk read by the client, over real HTTP (node:http,
 *    toNodeListener, fetch) with 1 and 200 chats streaming at once: each model stamps its deltas
 *    with performance.now(), the reader subtracts (one process, one clock).
 * 3. 1, 100 and 1,000 chats at once beside the AI SDK's own streamText (see chat-scale.ts).
 */
import { createServer } from 'node:http';
import { pathToFileURL } from 'node:url';
import { createAgentMachine, MemorySessionStore, type Model } from '../src/index.js';
import { createChatHandler, toNodeListener } from '../src/http.js';
import { ChatRun } from '../src/http/chat-run.js';
import { FetchSink } from '../src/http/fetch-sink.js';
import { RunChunker } from '../src/http/ui-chunks.js';
import { LiveLimitsSchema } from '../src/viewer/sse.js';
import { deliveryIds } from '../src/agent/protocol/delivery.js';
import { scaleTable } from './chat-scale.js';
import { median, printTable } from './support.js';

const CHUNKS = 50_000;
const RUNS = 5;
const DELTA = 'a few words of text, ';
const unbounded = LiveLimitsSchema.parse({ maxBufferedBytes: 2 ** 31 });

/** ns per chunk of `write` over CHUNKS deltas, into a body that is read out afterwards. */
async function perChunk(write: (sink: FetchSink) => (delta: string) => void): Promise<number> {
  const sink = new FetchSink(() => {});
  const send = write(sink);
  const t0 = performance.now();
  for (let i = 0; i < CHUNKS; i++) send(DELTA);
  const ns = ((performance.now() - t0) * 1e6) / CHUNKS;
  sink.end();
  await new Response(sink.body).arrayBuffer().catch(() => {});
  return ns;
}

const raw = (sink: FetchSink) => (delta: string) => sink.write(Buffer.from(`data: ${JSON.stringify({ type: 'text-delta', id: 'text-1-1', delta })}\n\n`));
const converted = (sink: FetchSink) => {
  const run = new ChatRun(new RunChunker(6, 1, 'bench'), unbounded, () => {});
  run.attach(sink, 0);
  let index = 0;
  return (delta: string) => run.event({ type: 'text.delta', id: deliveryIds.text(1, 1, 1, index++), turn: 1, delta });
};

async function conversionTable(): Promise<void> {
  const rows: Array<[string, number]> = [];
  const results = { raw: [] as number[], converted: [] as number[] };
  for (let i = 0; i < RUNS + 1; i++) {
    const r = await perChunk(raw);
    const c = await perChunk(converted);
    if (i > 0) results.raw.push(r), results.converted.push(c);
  }
  rows.push(['raw SSE write (baseline)', median(results.raw)], ['chunker + run log + bounded response', median(results.converted)]);
  printTable(`Chat stream: cost per text-delta chunk (${CHUNKS.toLocaleString('en-US')} chunks, median of ${RUNS})`, ['path', 'ns/chunk', 'x baseline'], rows.map(([name, ns]) => [name, ns, ns / rows[0]![1]]));
}

/** A model streaming `deltas` deltas `everyMs` apart, each carrying the time it was handed over. */
function stampingModel(deltas: number, everyMs: number): Model {
  return {
    name: 'stamping',
    async generate(request) {
      for (let i = 0; i < deltas; i++) {
        await new Promise((resolve) => setTimeout(resolve, everyMs));
        request.onTextDelta?.(`${performance.now()};`);
      }
      return { message: { role: 'assistant', content: 'done' }, finishReason: 'stop', usage: { inputTokens: 1, outputTokens: 1 } };
    },
  };
}

async function latencyTable(): Promise<void> {
  const rows: Array<[number, number, number, number]> = [];
  for (const chats of [1, 200]) {
    const handler = createChatHandler({ machine: createAgentMachine({ model: stampingModel(20, 25) }), store: new MemorySessionStore() });
    const server = createServer(toNodeListener(handler)).listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    const api = `http://127.0.0.1:${(server.address() as { port: number }).port}/api/chat`;
    const latencies: number[] = [];
    await Promise.all(
      Array.from({ length: chats }, async (_, i) => {
        const body = JSON.stringify({ id: `bench-${i}`, messages: [{ id: 'u', role: 'user', parts: [{ type: 'text', text: 'go' }] }] });
        const response = await fetch(api, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
        const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
        let buffered = '';
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          const now = performance.now();
          buffered += value;
          const events = buffered.split('\n\n');
          buffered = events.pop()!;
          for (const event of events) {
            const match = /"delta":"([\d.]+);"/.exec(event);
            if (match) latencies.push(now - Number(match[1]));
          }
        }
      }),
    );
    await handler.close();
    server.close();
    latencies.sort((a, b) => a - b);
    rows.push([chats, latencies.length, median(latencies), latencies[Math.floor(latencies.length * 0.99)]!]);
  }
  printTable('Chat stream: model delta to the chunk read by the client, over HTTP (20 deltas 25 ms apart per chat)', ['chats', 'deltas', 'median ms', 'p99 ms'], rows);
}

export async function run(): Promise<void> {
  await conversionTable();
  await latencyTable();
  await scaleTable();
}

if (import.meta.url === pathToFileURL(process.argv[1]!).href) await run();
