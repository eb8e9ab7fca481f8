/**
 * Host drivers of the conformance matrix: one interface over every way to run an agent, so a
 * scenario (test/agent/matrix/scenarios.ts) runs unchanged on each. `start` begins the run and
 * answers its waits with the scenario's script, `steer` / `cancel` act on it while it runs,
 * `crash` cuts it off as a dead process would and opens it again, `result` normalizes how it
 * ended. A host that has no way to do something throws `Unsupported`: the matrix declares those
 * cells refused by design (test/agent/matrix/cells.ts), so a driver never fakes one.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isMainThread } from 'node:worker_threads';
import { createActor, toPromise } from 'xstate';
import { createAgentMachine, type AgentActor } from '../../../machines/agent.machine.js';
import { type AgentEvent } from '../../../src/agent/protocol/agent-event.js';
import { runInFlight, type AgentOutput } from '../../../src/agent/protocol/actor-types.js';
import type { AgentConfig } from '../../../src/agent/core/config.js';
import { APPROVALS_OPERATION } from '../../../src/agent/approvals/approval-events.js';
import { decisionEvent, requestFor, type ApprovalRequest } from '../../../src/agent/approvals/approval-binding.js';
import { runAgent, streamAgent, type RunAgentResult } from '../../../src/agent/hosts/run-agent.js';
import { AgentStepper, type SteppedSession } from '../../../src/agent/hosts/stepper.js';
import type { AgentContext } from '../../../src/agent/core/context.js';
import { createChatHandler, type ChatHandler } from '../../../src/http.js';
import { main } from '../../../src/cli/main.js';
import { doubtRequests } from '../../../src/agent/in-doubt/in-doubt.js';
import { serviceKey } from '../../../src/agent/protocol/keys.js';
import { decodeRow } from '../../../src/sessions/session-row.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import type { SessionStore } from '../../../src/stores/session-store.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';
import { SqliteSessionStore } from '../../../src/stores/sqlite.js';
import { openSqlite } from '../../../src/stores/sqlite-driver.js';
import { useAgent } from './fixtures/cli-agent.js';
import type { Message } from '../../../src/schemas.js';
import { loadSdk, page, userMessage, type UIMessage } from '../../http/support.js';
import type { Answer, Probe, RunResult, Wait } from './scenarios.js';

export type OnWait = (wait: Wait) => Answer;

export interface HostDriver {
  /**
   * `probe` is the one `config`'s tools and models count in. A host whose agent is built in
   * another process from the same scenario (the Restate worker) reports that process's probe into
   * it; the in-process hosts run `config` itself and need not look at it.
   */
  start(config: AgentConfig, prompt: string, onWait: OnWait, probe: Probe): Promise<void>;
  steer(message: string): Promise<void>;
  cancel(): Promise<void>;
  /** The process holding the run dies while a tool runs; a fresh one (with `config` and its `probe`) opens the session again. */
  crash(config: AgentConfig, probe: Probe): Promise<void>;
  result(): Promise<RunResult>;
  dispose(): Promise<void>;
}

/** What a host cannot do by design (the cell that needs it is declared refused). */
export class Unsupported extends Error {}

let sessions = 0;
/** A session id of its own for each run, unique across files and reruns on one store. */
export const freshSessionId = (host: string) => `matrix-${host}-${process.pid}-${Date.now().toString(36)}-${++sessions}`;

/** The event that delivers `answer` for `wait`. */
export function eventFor(wait: Wait, answer: Answer): AgentEvent {
  if ('approve' in answer && wait.kind === 'approval') return decisionEvent(wait.request, { approved: answer.approve });
  if ('doubt' in answer && wait.kind === 'doubt') {
    const { toolCallId, digest, run } = wait.request;
    return { type: 'doubt.decide', toolCallId, digest, run, ...answer.doubt } as AgentEvent;
  }
  if ('resume' in answer) return { type: 'operation.resume', ...answer.resume };
  if ('raise' in answer) return { type: 'budget.raise', budget: answer.raise } as AgentEvent;
  throw new Error(`the script answered ${JSON.stringify(answer)} to a ${wait.kind} wait`);
}

/** A promise that rejects with the first failure of the driving script (raced with the run's end). */
export function failureSink(): { failed: Promise<never>; fail: (error: unknown) => void } {
  let fail!: (error: unknown) => void;
  const failed = new Promise<never>((_, reject) => (fail = reject));
  failed.catch(() => {});
  return { failed, fail };
}

/** Listens to an actor's waits and answers them through `send` (after the current event is taken); a script that throws fails the run. */
export function answerFrom(actor: AgentActor, onWait: OnWait, send: (event: AgentEvent) => void, fail: (error: unknown) => void): void {
  const later = (wait: Wait) =>
    void Promise.resolve()
      .then(() => send(eventFor(wait, onWait(wait))))
      .catch(fail);
  actor.on('approval.requested', ({ requests }) => requests.forEach((request) => later({ kind: 'approval', request })));
  actor.on('tool.inDoubt', ({ requests }) => requests.forEach((request) => later({ kind: 'doubt', request })));
  actor.on('operation.yielded', ({ operation, reason, payload }) => {
    // Approvals yield as an operation too: answered above, by their requests.
    if (operation === APPROVALS_OPERATION) return;
    if (operation === 'budget' && typeof (payload as { resumeAt?: unknown } | null)?.resumeAt === 'number') return;
    later(operation === 'budget' ? { kind: 'budget', limit: reason } : { kind: 'operation', operation, reason });
  });
}

/** Emitted events as the matrix compares them. */
export function recordEvents(actor: AgentActor, into: { type: string; id?: string | undefined }[]): void {
  actor.on('*', (event) => into.push({ type: event.type, ...('id' in event && typeof event.id === 'string' && { id: event.id }) }));
}

export function normalize(output: Pick<AgentOutput, 'outcome' | 'messages'>, events: RunResult['events']): RunResult {
  const { outcome, messages } = output;
  return {
    outcome: {
      type: outcome.type,
      ...('reason' in outcome && { reason: outcome.reason }),
      ...(outcome.type === 'Failed' && { errorType: outcome.error.type }),
      ...(outcome.type === 'Completed' && { finalText: outcome.finalText, output: outcome.output }),
    },
    text: outcome.type === 'Completed' ? outcome.finalText : '',
    toolCalls: toolResults(messages),
    messages,
    events,
  };
}

function toolResults(messages: readonly Message[]): RunResult['toolCalls'] {
  return messages.flatMap((m) => (m.role === 'tool' ? [{ name: m.toolName ?? '', content: m.content, isError: m.isError === true }] : []));
}

/** The actor: `createActor(createAgentMachine(config), { input: { prompt } })`, waits answered by events. */
function actorHost(): HostDriver {
  let actor: AgentActor | undefined;
  const events: { type: string; id?: string }[] = [];
  const { failed, fail } = failureSink();
  return {
    async start(config, prompt, onWait) {
      actor = createActor(createAgentMachine(config), { input: { prompt } });
      recordEvents(actor, events);
      answerFrom(actor, onWait, (event) => actor!.send(event), fail);
      actor.start();
    },
    async steer(message) {
      actor!.send({ type: 'steer', message });
    },
    async cancel() {
      actor!.send({ type: 'cancel' });
    },
    crash: async () => {
      throw new Unsupported('the actor keeps no journal');
    },
    result: async () => normalize(await Promise.race([toPromise(actor!), failed]), events),
    async dispose() {
      actor?.stop();
    },
  };
}

/** `runAgent` and `streamAgent`: approvals go to `approve`, everything else the host decides itself. */
function unattendedHost(streaming: boolean): HostDriver {
  const abort = new AbortController();
  let done: Promise<RunAgentResult> | undefined;
  const events: { type: string; id?: string }[] = [];
  return {
    async start(config, prompt, onWait) {
      const approve = (request: ApprovalRequest) => {
        const answer = onWait({ kind: 'approval', request });
        if (!('approve' in answer)) throw new Error('not an approval answer');
        return answer.approve;
      };
      const options = { ...config, prompt, approve, signal: abort.signal };
      if (!streaming) {
        done = runAgent(options);
        return;
      }
      done = (async () => {
        for await (const event of streamAgent(options)) {
          if (event.type === 'done') return event.result;
          events.push({ type: event.type, ...('id' in event && typeof event.id === 'string' && { id: event.id }) });
        }
        throw new Error('streamAgent ended without done');
      })();
    },
    steer: async () => {
      throw new Unsupported('runAgent and streamAgent take no events while they run');
    },
    async cancel() {
      abort.abort();
    },
    crash: async () => {
      throw new Unsupported('runAgent keeps no journal');
    },
    async result() {
      const result = await done!;
      return normalize(result, streaming ? events : null);
    },
    async dispose() {
      abort.abort();
      await done?.catch(() => {});
    },
  };
}

/** `DurableSession` on a store: waits answered through the session (a decision by its request). */
export function durableHost(store: () => SessionStore, name: string): HostDriver {
  let session: DurableSession | undefined;
  let onWait: OnWait;
  const sessionId = freshSessionId(name);
  const events: { type: string; id?: string }[] = [];
  const { failed, fail } = failureSink();
  let generation = 0;
  const open = async (config: AgentConfig) => {
    const mine = ++generation;
    session = await DurableSession.open({
      machine: createAgentMachine(config),
      store: store(),
      sessionId,
      attach: (actor) => {
        recordEvents(actor, events);
        // Only the session opened last answers (a crashed one is gone).
        answerFrom(actor, onWait, (event) => generation === mine && session!.send(event), fail);
      },
    });
  };
  return {
    async start(config, prompt, wait) {
      onWait = wait;
      await open(config);
      session!.send({ type: 'input', message: prompt });
    },
    async steer(message) {
      session!.send({ type: 'steer', message });
    },
    async cancel() {
      session!.send({ type: 'cancel' });
    },
    async crash(config) {
      // As a SIGKILL leaves it: what was stored stays, nothing more is written, the tool in flight never returns.
      await session!.flush();
      session!.actor.stop();
      await open(config);
    },
    async result() {
      const output = await Promise.race([session!.whenIdle(), failed]);
      if (!output) throw new Error('no run stored');
      return normalize(output, events);
    },
    async dispose() {
      await session?.close().catch(() => {});
    },
  };
}

/** The waits of a stepped session that yielded, read from its plain-JSON context. */
function waitsOf(session: SteppedSession): Wait[] {
  const { context, value } = session as unknown as { context: AgentContext; value: unknown };
  if (JSON.stringify(value).includes('"BudgetPaused"')) return [{ kind: 'budget', limit: 'paused' }];
  const waiting = context.operations.waiting;
  if (waiting) {
    if (waiting.operation === 'budget') return [{ kind: 'budget', limit: waiting.reason }];
    if (waiting.operation !== 'approvals') return [{ kind: 'operation', operation: waiting.operation, reason: waiting.reason }];
  }
  const brain = context.brain.context;
  const calls = brain.pendingTools.map((pending) => pending.call);
  return context.approvals.waiting.map((id) => ({ kind: 'approval', request: requestFor(calls.find((call) => call.id === id)!, context.runIndex, brain.turnsTaken) }));
}

/** `AgentStepper`: the caller performs each step and applies its effects; a steer joins the next apply. */
function stepperHost(): HostDriver {
  let stepper: AgentStepper | undefined;
  let loop: Promise<void> | undefined;
  const queued: AgentEvent[] = [];
  let cancelled = false;
  return {
    async start(config, prompt, onWait) {
      stepper = new AgentStepper(createAgentMachine(config), { input: { prompt } }, { timeoutMs: 5_000 });
      loop = (async () => {
        for (let i = 0; i < 50; i++) {
          const { status, effects } = await stepper!.step();
          if (cancelled) {
            stepper!.finalize();
            return;
          }
          if (status === 'finished') return;
          if (status === 'yielded') stepper!.apply([...queued.splice(0), ...waitsOf(stepper!.session).map((wait) => eventFor(wait, onWait(wait)))]);
          else stepper!.apply([...queued.splice(0), ...effects]);
        }
        throw new Error('the stepped run took more than 50 steps');
      })();
    },
    async steer(message) {
      queued.push({ type: 'steer', message });
    },
    async cancel() {
      cancelled = true;
    },
    crash: async () => {
      throw new Unsupported('the stepper keeps no journal of a step in flight');
    },
    async result() {
      await loop;
      const session = stepper!.session as unknown as { status: string; output?: AgentOutput; context: AgentContext };
      const output = session.output ?? (session.context.lastRun && { ...session.context.lastRun, messages: session.context.brain.context.history });
      if (!output) throw new Error(`the stepped session has no output (status ${session.status})`);
      return normalize(output, null);
    },
    async dispose() {
      cancelled = true;
      await loop?.catch(() => {});
    },
  };
}

/**
 * The chat handler, through its Fetch handler with real Requests and the AI SDK 6 transport a
 * `useChat` page uses: approvals answered as the page answers them, the rest read from the store
 * (the stored session is the truth the page loads).
 */
function chatHost(): HostDriver {
  const store = new MemorySessionStore();
  const chatId = freshSessionId('chat');
  let handler: ChatHandler | undefined;
  let done: Promise<UIMessage> | undefined;
  return {
    async start(config, prompt, onWait) {
      handler = createChatHandler({ machine: createAgentMachine(config), store, aiSdk: 6 });
      const chat = page(await loadSdk(6), handler, chatId);
      const user = userMessage(prompt);
      done = (async () => {
        let message = await chat.send([user]);
        for (let i = 0; i < 10 && message.metadata?.outcome === 'waiting'; i++) {
          const asked = message.parts.filter((part) => part.state === 'approval-requested');
          if (asked.length === 0) throw new Unsupported('the run waits for something other than an approval: the page has no answer for it');
          const answered: UIMessage = {
            ...message,
            parts: message.parts.map((part) => {
              if (part.state !== 'approval-requested') return part;
              const request = { toolCallId: part.toolCallId!, toolName: part.type.slice('tool-'.length), args: part.input } as ApprovalRequest;
              const answer = onWait({ kind: 'approval', request });
              return { ...part, state: 'approval-responded', approval: { ...part.approval!, approved: 'approve' in answer && answer.approve } };
            }),
          };
          message = await chat.send([user, answered], answered);
        }
        return message;
      })();
    },
    steer: async () => {
      throw new Unsupported('a message while a run streams is a 409');
    },
    async cancel() {
      const response = await handler!(new Request(`http://127.0.0.1/api/chat/${encodeURIComponent(chatId)}/cancel`, { method: 'POST' }));
      if (response.status !== 202) throw new Error(`cancel answered ${response.status}: ${await response.text()}`);
    },
    crash: async () => {
      throw new Unsupported('not in one process');
    },
    async result() {
      const message = await done!;
      const context = await storedContext(store, chatId);
      if (!context.lastRun) throw new Error(`no run stored (the page saw ${message.metadata?.outcome})`);
      expectSame(message.metadata?.outcome, context.lastRun.outcome.type);
      return storedResult(context);
    },
    async dispose() {
      await handler?.close();
    },
  };
}

/** A session as its store holds it (what a host that shows no output of its own is judged by). */
export async function storedContext(store: SessionStore, sessionId: string): Promise<AgentContext> {
  const stored = await store.load(sessionId);
  if (!stored) throw new Error(`no session ${sessionId} stored`);
  return decodeRow(sessionId, stored.state, stored.messages);
}

/** The stored session's last run, normalized as the other hosts' outputs are. */
export function storedResult(context: AgentContext): RunResult {
  if (!context.lastRun) throw new Error('no run stored');
  return normalize({ outcome: context.lastRun.outcome, messages: context.brain.context.history }, null);
}

/** The page's finish chunk and the store agree on how the run ended. */
function expectSame(page: string | undefined, stored: string): void {
  if (page !== stored) throw new Error(`the page's finish says ${page}, the store says ${stored}`);
}

/** The agent module the CLI driver names with `--agent` (it returns the config `useAgent` set). */
const CLI_AGENT = fileURLToPath(new URL('./fixtures/cli-agent.ts', import.meta.url));

/** What one CLI command did: its exit code and what it printed. */
interface CliRun {
  argv: string[];
  code: number;
  out: string;
  err: string;
}

function runCli(argv: string[]): Promise<CliRun> {
  const out: string[] = [];
  const err: string[] = [];
  return main(argv, { out: (line) => out.push(line), err: (line) => err.push(line) }).then((code) => ({ argv, code, out: out.join('\n'), err: err.join('\n') }));
}

const said = (run: CliRun) => `\`loopchart ${run.argv.join(' ')}\` exited ${run.code}: ${run.err || run.out}`;

/** The CLI's words for a decision on a call in doubt: `rerun`, `fail`, `result JSON`. */
function doubtArgs(answer: Answer): string[] {
  if (!('doubt' in answer)) throw new Error(`the script answered ${JSON.stringify(answer)} to a doubt wait`);
  const { doubt } = answer;
  return doubt.action === 'result' ? ['result', JSON.stringify(doubt.result)] : [doubt.action];
}

/** The calls of a stored session that wait in doubt, as `sessions doubt` finds them (src/cli/doubt.ts). */
async function storedDoubts(store: SessionStore, sessionId: string): Promise<ApprovalRequest[]> {
  const decoded = await storedContext(store, sessionId);
  const batch = decoded.brain.value === 'AwaitingTools' ? serviceKey(decoded, decoded.brain.context.turnsTaken, 'tools') : null;
  const context = batch ? { ...decoded, toolJournal: await store.journaledToolResults(sessionId, batch) } : decoded;
  return doubtRequests(context).requests;
}

/** The exit code the CLI gives for how a run ended (src/cli/main.ts: 130 for Ctrl-C, 1 for Failed). */
const exitCodeFor = (outcome: string) => (outcome === 'Failed' ? 1 : outcome === 'Cancelled' ? 130 : 0);

/**
 * The CLI, in process: `main(argv, io)` of src/cli/main.ts, each command as a shell would run it,
 * on a SQLite file of the run's own. The session is made first (`sessions send` continues a
 * stored session), `sessions send` runs it with test/agent/matrix/fixtures/cli-agent.ts as its
 * `--agent` (which returns the scenario's config, handed over in process); a cancel is Ctrl-C (a
 * real SIGINT to this process, taken by the command's handler); a call in doubt is decided with
 * `sessions doubt` and the run continued with `sessions resume`. The result is read back from the
 * store, and the command's exit code and its `outcome:` line must agree with it. What the CLI
 * does not decide (an approval, an operation, a budget pause) stops the command with exit 1: that
 * is `Unsupported` here, and those cells are declared.
 */
export function cliHost(dir: string): HostDriver {
  const sessionId = freshSessionId('cli');
  let path = join(dir, `${sessionId}.db`);
  let onWait: OnWait;
  let running: Promise<CliRun> | undefined;
  const commands: Promise<CliRun>[] = [];
  let sigintBefore: readonly unknown[] = [];
  const cli = (...argv: string[]) => {
    const run = runCli([...argv, '--store', path]);
    commands.push(run);
    return run;
  };
  const withStore = async <T>(work: (store: SessionStore) => Promise<T>): Promise<T> => {
    const store = new SqliteSessionStore({ path });
    try {
      return await work(store);
    } finally {
      await store.close();
    }
  };
  return {
    async start(config, prompt, wait) {
      onWait = wait;
      useAgent(config);
      await withStore(async (store) => (await DurableSession.open({ machine: createAgentMachine(config), store, sessionId })).close());
      sigintBefore = process.listeners('SIGINT');
      running = cli('sessions', 'send', sessionId, prompt, '--agent', CLI_AGENT);
    },
    steer: async () => {
      throw new Unsupported('the CLI takes no message while its run goes: the run is in its process, and `sessions send` starts the next run');
    },
    async cancel() {
      // Only a forked worker is a process of its own (a thread's pid is the runner's), and only
      // with the command's handler there does SIGINT cancel the run rather than end the process.
      if (!isMainThread || process.listenerCount('SIGINT') <= sigintBefore.length) throw new Error('no SIGINT handler of a running CLI command in this process');
      // A signal arrives later; listeners run in the order they were added, so this one hears it once the command's has.
      const heard = new Promise((resolve) => process.once('SIGINT', resolve));
      process.kill(process.pid, 'SIGINT');
      await heard;
    },
    async crash(config) {
      // What a SIGKILL of the command's process leaves is what its store holds now (the call's
      // start was committed before the tool ran): a copy of it is the store the next process
      // opens. The command cut off goes on with a file nobody reads any more.
      const copy = join(dir, `${sessionId}-after-crash.db`);
      const db = openSqlite(path, { busyTimeoutMs: 5_000 });
      try {
        db.exec(`VACUUM INTO '${copy.replaceAll("'", "''")}'`);
      } finally {
        db.close();
      }
      path = copy;
      useAgent(config);
      running = undefined;
    },
    async result() {
      let last = await (running ?? cli('sessions', 'resume', sessionId, '--agent', CLI_AGENT));
      for (let round = 0; round < 5; round++) {
        const context = await withStore((store) => storedContext(store, sessionId));
        if (!runInFlight(context.brain)) {
          const result = storedResult(context);
          const outcome = result.outcome.type;
          if (last.code !== exitCodeFor(outcome) || !last.out.includes(`outcome: ${outcome}`)) throw new Error(`the store says ${outcome}, ${said(last)}\n${last.out}`);
          return result;
        }
        const doubts = await withStore((store) => storedDoubts(store, sessionId));
        if (doubts.length === 0) throw new Unsupported(`the run waits for what the CLI does not decide: ${said(last)}`);
        for (const request of doubts) {
          const decided = await cli('sessions', 'doubt', sessionId, request.toolCallId, ...doubtArgs(onWait({ kind: 'doubt', request })));
          if (decided.code !== 0) throw new Error(said(decided));
        }
        last = await cli('sessions', 'resume', sessionId, '--agent', CLI_AGENT);
      }
      throw new Error(`the CLI run did not end in 5 rounds of decisions: ${said(last)}`);
    },
    async dispose() {
      await Promise.allSettled(commands);
      // The command's process would have ended; here its Ctrl-C handler (kept after a first press) goes with it.
      for (const listener of process.listeners('SIGINT')) if (!sigintBefore.includes(listener)) process.off('SIGINT', listener as () => void);
    },
  };
}

export type HostFactory = () => HostDriver;

/** The in-process drivers by host id (the stores of the durable ones are the caller's). */
export const inProcessHosts = {
  actor: actorHost,
  runAgent: () => unattendedHost(false),
  streamAgent: () => unattendedHost(true),
  stepper: stepperHost,
  chat: chatHost,
} satisfies Record<string, HostFactory>;
