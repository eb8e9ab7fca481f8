/**
 * The demo's run with an XState inspector attached through the actor's `inspect` option.
 *
 *   npx tsx examples/inspect.ts                    # offline: record the inspection events, print the states
 *   LOOPCHART_INSPECT=ws npx tsx examples/inspect.ts
 *
 * With `LOOPCHART_INSPECT=ws` the events also go to @statelyai/inspect's WebSocket inspector. By
 * default this starts its local bridge (http://localhost:8080, port from LOOPCHART_INSPECT_PORT)
 * and keeps serving after the run until Ctrl+C: open the page in a browser to see the statechart
 * (the page embeds the inspector UI from stately.ai, so the browser needs the internet). With
 * `LOOPCHART_INSPECT_URL=ws://host:port` it connects to a bridge you run yourself instead.
 *
 * Either way, the inspector gets snapshots through `summarizingInspector`, which replaces message
 * lists by `{ count, last }` so a long conversation is not serialized on every event.
 */
import { createWebSocketInspector } from '@statelyai/inspect';
import { createActor, toPromise, type InspectionEvent } from 'xstate';
import { summarizingInspector, type AgentOutput } from '../src/index.js';
import { createFolderAgent } from './folder-agent.js';
import { exitCodeOf, traceAgent } from './trace.js';

const mode = process.env.LOOPCHART_INSPECT === 'ws' ? 'ws' : 'record';

// -- The recorder: a plain inspect callback that keeps what we want to print.

interface Row {
  /** The agent actor's state value, e.g. `Running.AwaitingModel`. */
  state: string;
  /** The brain's own state name inside the agent's context. */
  brain: string;
  /** Events that led here, in order, with repeats collapsed (`service.textDelta ×4`). */
  events: string[];
  /** Conversation size as the inspector saw it. */
  messages: string;
  /** Largest JSON size of a snapshot the inspector received in this state. */
  bytes: number;
}
const rows: Row[] = [];
const counts = new Map<string, number>();
const actorsSeen: string[] = [];

function record(event: InspectionEvent): void {
  counts.set(event.type, (counts.get(event.type) ?? 0) + 1);
  if (event.type === '@xstate.actor') {
    const { src, id } = event.actorRef as { src?: unknown; id?: string };
    actorsSeen.push(event.actorRef.sessionId === event.rootId ? 'agent (root)' : typeof src === 'string' ? src : (id ?? '?'));
    return;
  }
  // Only the agent's own snapshots: its invoked services (model, tools) report theirs too.
  if (event.type !== '@xstate.snapshot' || event.actorRef.sessionId !== event.rootId) return;
  const snapshot = event.snapshot as unknown as { value: unknown; context: Record<string, unknown> };
  const state = stateName(snapshot.value);
  const bytes = JSON.stringify(snapshot.context).length;
  const last = rows.at(-1);
  if (last && last.state === state) {
    addEvent(last.events, event.event.type);
    last.bytes = Math.max(last.bytes, bytes);
    last.messages = messagesOf(snapshot.context);
    return;
  }
  rows.push({ state, brain: brainOf(snapshot.context), events: [event.event.type], messages: messagesOf(snapshot.context), bytes });
}

const stateName = (value: unknown): string =>
  typeof value === 'string' ? value : Object.entries(value as Record<string, unknown>).map(([k, v]) => `${k}.${stateName(v)}`).join(',');

function addEvent(events: string[], type: string): void {
  const last = events.at(-1);
  const match = last?.match(/^(.*?)(?: ×(\d+))?$/);
  if (match && match[1] === type) events[events.length - 1] = `${type} ×${Number(match[2] ?? 1) + 1}`;
  else events.push(type);
}

/** The brain's state and message counts, read from the (possibly summarized) context. */
function brainOf(context: Record<string, unknown>): string {
  const brain = context.brain as { value?: string } | undefined;
  return brain?.value ?? '?';
}
function messagesOf(context: Record<string, unknown>): string {
  const inner = (context.brain as { context?: Record<string, unknown> } | undefined)?.context ?? {};
  const size = (list: unknown) => (Array.isArray(list) ? list.length : (list as { count?: number } | undefined)?.count ?? 0);
  return `${size(inner.history)} + ${size(inner.pending)} pending`;
}

// -- Where the events go.

const recorder = summarizingInspector(record);
let inspect: (event: InspectionEvent) => void = recorder;
let finish = async (): Promise<void> => {};

if (mode === 'ws') {
  let url = process.env.LOOPCHART_INSPECT_URL;
  let bridge: { stop(): void } | undefined;
  if (!url) {
    const { createInspectorServer } = await import('@statelyai/inspect/server');
    const port = Number(process.env.LOOPCHART_INSPECT_PORT ?? 8080);
    bridge = createInspectorServer({ port, autoOpen: false });
    url = `ws://localhost:${port}`;
    console.log(`inspector bridge: open http://localhost:${port} in a browser (the UI loads from stately.ai)`);
  }
  const ws = createWebSocketInspector({ url });
  const toWs = summarizingInspector(ws.inspect);
  inspect = (event) => {
    recorder(event);
    toWs(event);
  };
  finish = async () => {
    // Give the socket a moment to flush what it deferred while connecting.
    await new Promise((resolve) => setTimeout(resolve, 500));
    if (bridge) {
      console.log('\nstill serving the inspector bridge: Ctrl+C to quit');
      await new Promise((resolve) => process.once('SIGINT', resolve));
      bridge.stop();
    }
    ws.stop();
  };
}

// -- The run: the demo's agent, with `inspect` on the actor.

const agent = createFolderAgent();
console.log(`loopchart inspect · ${mode === 'ws' ? 'WebSocket inspector + recorder' : 'recording inspection events'} · folder: ${agent.label}\n`);
const actor = createActor(agent.machine, { input: agent.input, inspect });
const trace = traceAgent(actor);
actor.start();
let output: AgentOutput | undefined;
try {
  output = await toPromise(actor);
} catch (error) {
  console.error('the agent actor crashed:', error);
} finally {
  trace.stop();
}

// -- What the inspector saw.

console.log('\nthe agent actor\'s states, as the inspector saw them:\n');
console.log(rows.map((row) => row.state.replace(/^Running\./, '')).join(' → '));
console.log();
const header = ['#', 'agent state', 'brain', 'messages', 'max snapshot', 'events'];
const table = rows.map((row, i) => [String(i + 1), row.state, row.brain, row.messages, `${row.bytes} B`, row.events.join(', ')]);
const widths = header.map((h, i) => Math.max(h.length, ...table.map((r) => r[i]!.length)));
for (const row of [header, ...table]) console.log(`  ${row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ')}`);
console.log(`\ninspection events: ${[...counts].map(([type, n]) => `${type} ${n}`).join(', ')}`);
console.log(`actors: ${summarize(actorsSeen)}`);

await finish();
process.exit(output ? exitCodeOf(output) : 1);

function summarize(names: string[]): string {
  const tally = new Map<string, number>();
  for (const name of names) tally.set(name, (tally.get(name) ?? 0) + 1);
  return [...tally].map(([name, n]) => (n > 1 ? `${name} ×${n}` : name)).join(', ');
}
