/**
 * The chat handler at scale (issue 40): 1, 100 and 1,000 chats streaming at once in one process
 * over the same fake model, through loopchart's handler and through the AI SDK's own
 * `streamText(...).toUIMessageStreamResponse()` (ai 6), each read by an in-process client.
 *
 * Each chat's model sends DELTAS text deltas EVERY_MS apart, each stamped with performance.now();
 * after its first delta it waits until every chat has one, so all are open at once: then the heap
 * per open chat is measured (after a GC, over the heap before the chats), and the CPU of the
 * streaming that follows (process.cpuUsage, divided by the deltas read) and each delta's latency
 * from the model's hand-over to the client's read (p50, p99; the timers' own lateness included,
 * alike for both). Opening the chats (loopchart: a durable session each) is reported apart.
 */
import { streamText } from 'ai-v6';
import { createAgentMachine, MemorySessionStore, type Model } from '../src/index.js';
import { createChatHandler } from '../src/http.js';
import { median, printTable } from './support.js';

const DELTAS = 20;
const EVERY_MS = 25;

/** One run of N chats: what the bench reports. */
interface Measured {
  openCpuMsPerChat: number;
  cpuUsPerDelta: number;
  p50: number;
  p99: number;
  heapKbPerChat: number;
}

/** A gate all chats wait at after their first delta; opened once every chat's client has read one. */
function gate(chats: number) {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  let first = 0;
  return { opened, open, firstRead: () => ++first === chats, get count() { return first; } };
}

/** The deltas of one chat's model: stamped, EVERY_MS apart, waiting at the gate after the first. */
async function* stamps(opened: Promise<void>): AsyncGenerator<string> {
  for (let i = 0; i < DELTAS; i++) {
    await new Promise((resolve) => setTimeout(resolve, EVERY_MS));
    if (i === 1) await opened;
    yield `${performance.now()};`;
  }
}

function loopchartModel(opened: () => Promise<void>): Model {
  return {
    name: 'stamping',
    async generate(request) {
      for await (const delta of stamps(opened())) request.onTextDelta?.(delta);
      return { message: { role: 'assistant', content: 'done' }, finishReason: 'stop', usage: { inputTokens: 1, outputTokens: 1 } };
    },
  };
}

function aiSdkModel(opened: () => Promise<void>) {
  return {
    specificationVersion: 'v3' as const,
    provider: 'bench',
    modelId: 'stamping',
    supportedUrls: {},
    doGenerate: async () => {
      throw new Error('the bench model only streams');
    },
    doStream: async () => ({
      stream: new ReadableStream({
        async start(controller) {
          controller.enqueue({ type: 'stream-start', warnings: [] });
          controller.enqueue({ type: 'text-start', id: 't' });
          for await (const delta of stamps(opened())) controller.enqueue({ type: 'text-delta', id: 't', delta });
          controller.enqueue({ type: 'text-end', id: 't' });
          controller.enqueue({
            type: 'finish',
            finishReason: { unified: 'stop', raw: 'stop' },
            usage: { inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 1, text: 1, reasoning: undefined } },
          });
          controller.close();
        },
      }),
    }),
  };
}

type Handler = (request: Request) => Promise<Response>;

/** N chats at once through `handler`; `opened` is the gate each model waits at. */
async function measure(chats: number, make: (opened: () => Promise<void>) => { handler: Handler; close: () => Promise<void> }): Promise<Measured> {
  const g = gate(chats);
  const { handler, close } = make(() => g.opened);
  globalThis.gc?.();
  const heapBefore = process.memoryUsage().heapUsed;
  const latencies: number[] = [];
  let deltas = 0;
  const cpuAtOpen = process.cpuUsage();
  let cpuAtGate: NodeJS.CpuUsage | undefined;
  let heapAtGate = 0;
  const allOpen = new Promise<void>((resolve) => {
    void g.opened.then(resolve);
  });
  const readers = Array.from({ length: chats }, async (_, i) => {
    const body = JSON.stringify({ id: `scale-${i}`, messages: [{ id: 'u', role: 'user', parts: [{ type: 'text', text: 'go' }] }] });
    const response = await handler(new Request('http://127.0.0.1/api/chat', { method: 'POST', headers: { 'content-type': 'application/json' }, body }));
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buffered = '';
    let firstSeen = false;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      const now = performance.now();
      buffered += value;
      const events = buffered.split('\n\n');
      buffered = events.pop()!;
      for (const event of events) {
        const match = /"delta":"([\d.]+);"/.exec(event);
        if (!match) continue;
        deltas++;
        if (!firstSeen) {
          firstSeen = true;
          if (g.firstRead()) {
            // Every chat is open and has streamed: the heap they hold, then the streaming's CPU from here.
            globalThis.gc?.();
            heapAtGate = process.memoryUsage().heapUsed;
            cpuAtGate = process.cpuUsage();
            g.open();
          }
          continue;
        }
        latencies.push(now - Number(match[1]));
      }
    }
  });
  await allOpen;
  const deltasAtGate = deltas;
  await Promise.all(readers);
  const cpu = process.cpuUsage(cpuAtGate);
  const openCpu = { user: cpuAtGate!.user - cpuAtOpen.user, system: cpuAtGate!.system - cpuAtOpen.system };
  await close();
  latencies.sort((a, b) => a - b);
  return {
    openCpuMsPerChat: (openCpu.user + openCpu.system) / 1000 / chats,
    cpuUsPerDelta: (cpu.user + cpu.system) / (deltas - deltasAtGate),
    p50: median(latencies),
    p99: latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * 0.99))]!,
    heapKbPerChat: (heapAtGate - heapBefore) / 1024 / chats,
  };
}

const loopchart = (opened: () => Promise<void>) => {
  const handler = createChatHandler({ machine: createAgentMachine({ model: loopchartModel(opened) }), store: new MemorySessionStore() });
  return { handler, close: () => handler.close() };
};

const aiSdk = (opened: () => Promise<void>) => {
  const model = aiSdkModel(opened);
  const handler: Handler = async (request) => {
    const body = (await request.json()) as { messages: Array<{ parts: Array<{ text: string }> }> };
    return streamText({ model, prompt: body.messages.at(-1)!.parts[0]!.text }).toUIMessageStreamResponse();
  };
  return { handler, close: async () => {} };
};

export async function scaleTable(): Promise<void> {
  const rows: Array<Array<string | number>> = [];
  // A warm-up of each path (JIT), unreported.
  await measure(20, loopchart);
  await measure(20, aiSdk);
  for (const chats of [1, 100, 1000]) {
    const ai = await measure(chats, aiSdk);
    const lc = await measure(chats, loopchart);
    // One chat's heap is below what a GC leaves behind from run to run: shown from 100 chats on.
    const heap = (kb: number) => (chats >= 100 ? kb : '-');
    rows.push([chats, 'AI SDK streamText', ai.cpuUsPerDelta, ai.p50, ai.p99, heap(ai.heapKbPerChat), ai.openCpuMsPerChat, '']);
    rows.push([chats, 'loopchart handler', lc.cpuUsPerDelta, lc.p50, lc.p99, heap(lc.heapKbPerChat), lc.openCpuMsPerChat, `${(lc.cpuUsPerDelta / ai.cpuUsPerDelta).toFixed(2)}x`]);
  }
  printTable(
    `Chat at scale: N chats streaming at once in one process, ${DELTAS} deltas ${EVERY_MS} ms apart each, same fake model (globalThis.gc ${globalThis.gc ? 'on' : 'OFF: heap figures are noise'})`,
    ['chats', 'path', 'CPU us/delta', 'latency p50 ms', 'p99 ms', 'heap KB/chat', 'open CPU ms/chat', 'CPU vs AI SDK'],
    rows,
  );
}
