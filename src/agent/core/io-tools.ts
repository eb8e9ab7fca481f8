import type { ToolCall, ToolMessage } from '../../schemas.js';
import { isInterruptedResult, runToolCall } from '../../tools/run-tools.js';
import { inDoubtPolicy, ToolSet } from '../../tools/define-tool.js';
import { listSources, resolveOffered } from '../../tools/offered-tools.js';
import { rerunsOf } from './call-decisions.js';
import { madeHere, startToken } from '../protocol/start-marker.js';
import { depthOfIo, inScope, isAgentTool, type ChildHandle } from '../protocol/call-scope.js';
import type { SubagentReport } from '../protocol/actor-types.js';
import type { Handler, IoEvent, IoScope, RequestOf } from '../protocol/io-protocol.js';
import { ToolInDoubtError, isInDoubtSignal } from '../protocol/failure.js';
import { innerKey, startKeys } from '../protocol/keys.js';

/** One tool batch's bookkeeping: its calls queued in order, how far it got, how many run. */
interface Batch {
  controller: AbortController;
  started: Set<string>;
  /** `announce`: the IO reports the call's start as it starts it (unless the chart did, see `announced`). */
  queue: { call: ToolCall; announce: boolean }[];
  next: number;
  active: number;
  /** The run is ending (`endTools`): no call of the batch starts any more, and a result that existed at the abort is still reported. */
  ending?: boolean | undefined;
}

/** The tool calls of one IO actor: its `tools` handler and what the run's abort asks of them. */
export interface ToolScheduler {
  tools: Handler<'tools'>;
  /** Starts no other call of the batch: those queued are set aside until a request names them again. */
  hold: Handler<'holdTools'>;
  /** Starts no other call of the batch, one taken off the queue but not started yet included: the run ends. */
  end: Handler<'endTools'>;
  /** Whether a batch still runs calls or has some queued. */
  busy(): boolean;
  /** Forgets the batches: the run no longer needs them. */
  clear(): void;
}

/** The per-actor state the scheduler's pieces share. */
interface Scheduler {
  io: IoScope;
  /**
   * Tool batches by key. A batch may be asked for more than once (a decision makes calls
   * runnable while others still run, a restore re-issues it): each call runs once, and no more
   * than `toolConcurrency` of a batch run at a time.
   */
  batches: Map<string, Batch>;
  /** The start markers of 'ask' calls this IO made (see in-doubt.ts). */
  starts: Set<string>;
  executables: (offered: RequestOf<'tools'>['offered'], signal: AbortSignal) => ToolSet | Promise<ToolSet>;
}

/** Runs the tool calls of the run's batches, `toolConcurrency` at a time per batch. */
export function toolScheduler(io: IoScope): ToolScheduler {
  const state: Scheduler = { io, batches: new Map(), starts: new Set(), executables: executables(io) };
  return {
    tools: (request) => {
      let batch = state.batches.get(request.key);
      if (!batch) {
        // One batch at a time: a new one means the chart is done with the others.
        state.batches.clear();
        io.children.dropHeld();
        batch = { controller: io.run, started: new Set(), queue: [], next: 0, active: 0 };
        state.batches.set(request.key, batch);
      }
      const announced = new Set(request.announced);
      for (const call of request.calls) {
        if (batch.started.has(call.id)) continue;
        batch.started.add(call.id);
        batch.queue.push({ call, announce: !announced.has(call.id) });
      }
      pump(state, batch, request);
    },
    hold: (request) => {
      const batch = state.batches.get(request.key);
      const queued = batch ? batch.queue.splice(batch.next) : [];
      if (!batch || queued.length === 0) return;
      // Queued, so not announced yet: the later request that names them runs them, each announced as it starts.
      for (const { call } of queued) batch.started.delete(call.id);
      io.send(batch.controller, { type: 'io.toolsHeld', key: request.key, calls: queued.map(({ call }) => call.id) });
    },
    end: (request) => {
      const batch = state.batches.get(request.key);
      if (!batch) return;
      batch.ending = true;
      batch.queue.splice(batch.next);
    },
    busy: () => [...state.batches.values()].some((batch) => batch.active > 0 || batch.next < batch.queue.length),
    clear: () => {
      state.batches.clear();
      io.children.dropHeld();
    },
  };
}

/**
 * Runnable tools for the run's recorded set: this process's own listing when it made it,
 * else resolved once per IO actor (see `resolveOffered`). Without sources no await at all:
 * the work keeps its timing relative to the chart's events.
 */
function executables({ deps }: IoScope): Scheduler['executables'] {
  let resolving: Promise<ToolSet> | undefined;
  return (offered, signal) => {
    if (deps.toolSources.length === 0) return deps.tools;
    // A snapshot of an older build records no set: the sources are listed as they were then.
    if (!offered) return (resolving ??= listSources(deps.tools, deps.toolSources, signal).then(({ all }) => all));
    const cached = deps.listings.get(offered.key);
    if (cached) return cached;
    return (resolving ??= resolveOffered(deps.tools, deps.toolSources, offered.definitions, signal, offered.sources).then((set) => {
      deps.listings.set(offered.key, set);
      return set;
    }));
  };
}

/** Starts the batch's queued calls while it has room; each call's end makes room for the next. */
function pump(state: Scheduler, batch: Batch, request: RequestOf<'tools'>): void {
  const { io } = state;
  const { controller } = batch;
  const { key } = request;
  while (batch.active < io.deps.toolConcurrency && batch.next < batch.queue.length && !controller.signal.aborted) {
    const { call, announce } = batch.queue[batch.next++]!;
    batch.active++;
    runOne(state, batch, request, call, announce).then(
      (result) => {
        // Off the books before the chart hears it: the call is no longer in flight.
        batch.active--;
        io.children.ended(call.id);
        if (result) finished(io, batch, controller, { type: 'io.toolFinished', key, call, result });
        pump(state, batch, request);
      },
      (error) => {
        batch.active--;
        io.children.ended(call.id);
        // In doubt: the chart waits for a person; a decision to run it again hands it over anew.
        if (!isInDoubtSignal(error)) return io.fail(controller, key, 'tool', error);
        batch.started.delete(call.id);
        io.send(controller, { type: 'io.toolInDoubt', key, call });
        pump(state, batch, request);
      },
    );
  }
}

/**
 * Reports a call's result. Once the run was aborted only a batch that is ending reports one, and
 * only a result the tool gave (it existed when the abort came, see `CallInFlight.interrupt`), not
 * an interrupted answer in either wording: the chart, waiting in `Ending`, keeps the tool's result
 * and words the others itself. It knows which calls started, here or in a process before this one
 * (a call of a reopened batch); run-tools only knows that its own attempt never began, and its
 * "it did not run" would tell the model a call the process before ran had not.
 */
function finished(io: IoScope, batch: Batch, controller: AbortController, event: Extract<IoEvent, { type: 'io.toolFinished' }>): void {
  if (!controller.signal.aborted) return io.send(controller, event);
  if (batch.ending && !isInterruptedResult(event.result)) io.report(event);
}

/**
 * Runs one call as its side effect (an 'ask' tool's start journaled first), in its child-run
 * scope. Its start is reported here, as it really starts (unless the chart reported it): a call
 * queued behind `toolConcurrency` is not running while it waits its turn (see `pump`).
 */
async function runOne(state: Scheduler, batch: Batch, request: RequestOf<'tools'>, call: ToolCall, announce: boolean): Promise<ToolMessage | undefined> {
  const { io, starts } = state;
  const { deps, execute, send, children } = io;
  const { controller } = batch;
  const { key, turn } = request;
  await null; // after the chart's current step, as every request (see `start`)
  if (controller.signal.aborted || batch.ending) return undefined;
  if (announce) send(controller, { type: 'io.toolStarted', key, call });
  // The tool's idempotency key is the call's own, whichever rerun this is.
  const callKey = innerKey(key, { kind: 'tool', call: call.id, rerun: 0 });
  // An 'ask' tool's start is journaled first: a start this IO did not make is an earlier process's, so the call is in doubt.
  const keys = inDoubtPolicy(deps.tools.get(call.name)) === 'ask' ? startKeys(key, call.id, rerunsOf(request.doubt, call.id)) : null;
  const fresh = !keys || madeHere(starts, await execute({ key: keys.marker, kind: 'toolStart', input: { turn, call, batchKey: key }, signal: controller.signal }, async () => startToken(starts)));
  const runsAgent = isAgentTool(deps.tools.get(call.name));
  // Methods, not named arrows: under `keepNames` (tsup, tsx) each named closure made per call costs a call.
  const scope = {
    sessionId: request.sessionId,
    callId: call.id,
    parent: io.self,
    report(report: SubagentReport) {
      send(controller, { type: 'io.subagent', key, callId: call.id, report });
    },
    adopt(child: ChildHandle) {
      return children.adopt(call.id, child);
    },
    runsAgent,
    depth: depthOfIo(io.self),
  };
  return inScope(scope, () => execute(
    { key: keys?.step ?? callKey, kind: 'tool', input: { turn, call, batchKey: key }, signal: controller.signal },
    async () => {
      if (!fresh) throw new ToolInDoubtError(call.id);
      const listed = state.executables(request.offered, controller.signal);
      const tools = listed instanceof ToolSet ? listed : await listed;
      return runToolCall(call, tools, { signal: controller.signal, idempotencyKey: callKey, session: { sessionId: request.sessionId, scope: request.scope } });
    },
  ));
}
