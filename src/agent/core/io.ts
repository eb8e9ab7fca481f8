import { setMaxListeners } from 'node:events';
import { fromCallback, type AnyActorRef, type AnyEventObject } from 'xstate';
import { conversationView } from './conversation-view.js';
import { EFFECT_SPECIFICATION_VERSION } from '../protocol/executor.js';
import { PARENT_STOPPED, trusted, type FeatureHandlerMap, type Handler, type IoDeps, type IoRequest, type IoScope } from '../protocol/io-protocol.js';
import { ChildRoutes } from '../protocol/child-routes.js';
import { modelHandler, retryingModels } from './io-model.js';
import { toolScheduler, type ToolScheduler } from './io-tools.js';
import { toolsetHandler } from './toolset.js';
import { compactionHandler } from './io-compaction.js';

export { fromIo, type ConversationRef, type IoDeps, type IoEvent, type IoRequest, type PolicyVerdicts, type Slices, type SpeakerView } from '../protocol/io-protocol.js';

/**
 * The driver's IO: one long-lived child actor per agent that takes requests from the chart
 * (`sendTo`), hands each side effect to the executor, and reports back with events. Requests
 * carry the conversation by reference, never as an actor's input, so nothing of it lands in a
 * persisted snapshot; one actor for the agent's whole life means no actor per call. Each request
 * type has its handler (the core loop's in `./io-*.ts`, a feature's in its folder's `io.ts`);
 * this module keeps the run's bookkeeping and the dispatch.
 */
export function ioLogic(deps: IoDeps, features: FeatureHandlerMap) {
  return fromCallback<IoRequest>(({ sendBack, receive, self }) => {
    const { io, abortRun } = ioScope(deps, sendBack, self);
    const models = retryingModels(deps);
    const scheduler = toolScheduler(io);
    // What every agent's IO handles itself; features bring the other request types (see `FeatureHandlers`).
    const core: { [T in IoRequest['type']]?: Handler<T> } = {
      abort: () => abortRun(undefined, scheduler),
      toolset: toolsetHandler(io),
      model: modelHandler(io, models),
      tools: scheduler.tools,
      holdTools: scheduler.hold,
      endTools: scheduler.end,
      compaction: compactionHandler(io, models),
    };
    // A Map: request types come from the chart, and `receive` hears other events too. A feature's
    // handler is made on its first request.
    const handlers = new Map(Object.entries(core)) as Map<string, (request: IoRequest) => void>;
    const handlerOf = (type: string) => {
      let handler = handlers.get(type);
      const make = handler ? undefined : features.get(type);
      if (make) handlers.set(type, (handler = make(io) as (request: IoRequest) => void));
      return handler;
    };
    let received = false;
    let lastKey: string | undefined;
    receive((request) => {
      // A child run created with this actor as its parent reports its end here: its tool call hears it.
      if (request.type.startsWith('xstate.')) return;
      // Only a request for work counts: an abort, a hold or an event forwarded to a child (a
      // decision sent at once to a restored parent) starts nothing, and the work it waits for
      // must still be asked for again.
      if (request.type !== 'abort' && request.type !== 'forward' && request.type !== 'holdTools' && request.type !== 'endTools') {
        received = true;
        lastKey = request.key;
      }
      handlerOf(request.type)?.(request);
    });
    // A restored agent waits for IO that no one started: when no request for work came with this
    // actor's start (a fresh agent's first one is already in the mailbox), say so, and the chart
    // re-issues what it waits for with the same keys.
    queueMicrotask(() => {
      if (!received) sendBack(trusted({ type: 'io.attached' }));
    });
    return () => {
      abortRun(PARENT_STOPPED, scheduler);
      deps.onStop?.(lastKey);
    };
  });
}

/** The run's bookkeeping for one IO actor: what its handlers are given, and the abort of what is in flight. */
function ioScope(deps: IoDeps, sendBack: (event: AnyEventObject) => void, self: AnyActorRef) {
  /**
   * One controller for whatever the run has in flight; `abort` (cancel, seal) aborts it and
   * starts a new one. Work holds the controller it started under, so a late report from
   * aborted work is dropped.
   */
  let run = runController(deps.toolConcurrency);
  /**
   * Keys of requests in flight: a request asked for again (a restore re-issuing it) is not
   * started twice. Each holds a token: a call under the same key started as the previous one
   * ended (a fallback) is not taken off the books by the previous one's end.
   */
  const inFlight = new Map<string, object>();
  // Methods, not named arrows: under `keepNames` (tsup, tsx) each named closure made per run costs a call.
  const io: IoScope = {
    deps,
    self,
    get run() {
      return run;
    },
    children: new ChildRoutes(),
    start(key, work) {
      if (inFlight.has(key)) return;
      const controller = run;
      const token = {};
      inFlight.set(key, token);
      void later(controller, () => work(controller)).finally(() => inFlight.get(key) === token && inFlight.delete(key));
    },
    execute(effect, perform) {
      // The version first: a literal that starts with a spread gets a V8 map of its own per call when a key follows it.
      return deps.executor({ specificationVersion: EFFECT_SPECIFICATION_VERSION, ...effect }, perform);
    },
    send(controller, event) {
      if (!controller.signal.aborted) sendBack(trusted(event));
    },
    report(event) {
      sendBack(trusted(event));
    },
    finish(controller, key, event) {
      inFlight.delete(key);
      io.send(controller, event);
    },
    fail(controller, key, kind, error) {
      io.finish(controller, key, { type: 'io.failed', key, kind, error });
    },
    view: conversationView(undefined),
  };
  return {
    io,
    /** Aborts what is in flight, and only that: a finished call's signal never fires later. */
    abortRun(reason: unknown, tools: ToolScheduler) {
      const busy = inFlight.size > 0 || tools.busy();
      inFlight.clear();
      tools.clear();
      if (!busy) return;
      run.abort(reason);
      run = runController(deps.toolConcurrency);
    },
  };
}

/**
 * The controller of a run's IO. Every call of a batch listens to its signal at once (each tool
 * call runs with it), so Node's leak warning would fire past ten concurrent calls: the limit is
 * what the run may really have in flight.
 */
function runController(toolConcurrency: number): AbortController {
  const controller = new AbortController();
  setMaxListeners(toolConcurrency * 2 + 10, controller.signal);
  return controller;
}

/** Runs `work` a microtask from now, unless the request was aborted by then. */
async function later(controller: AbortController, work: () => Promise<void>): Promise<void> {
  await null;
  if (!controller.signal.aborted) await work();
}
