/**
 * The schedules host of the conformance matrix: a one-shot schedule (`schedule`, due now) whose
 * tick sends the scenario's prompt into a session of its own, fired by `startScheduler` on the
 * file's store (a real SQLite file), the scenario's agent under a name of this run's own. A run
 * that waits for someone ends the tick `Waiting` (the scheduler answers nobody); the driver then
 * answers through a `DurableSession` on the same store, as docs/schedules.md says, and the run
 * ends there. A crash is the scheduler let go mid-tick (`stop({ graceMs: 0 })`: the session closed
 * where it is stored, the lease given back) and another scheduler, with a fresh agent, taking the
 * tick over. The result is read from the store; the tick's outcome must agree with it.
 */
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { AgentEvent } from '../../../src/agent/protocol/agent-event.js';
import type { AgentConfig } from '../../../src/agent/core/config.js';
import { schedule, startScheduler, UnknownScheduleAgentError, type Scheduler, type ScheduleTick } from '../../../src/schedules.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import type { SessionStore } from '../../../src/stores/session-store.js';
import { answerFrom, failureSink, freshSessionId, normalize, storedContext, storedResult, Unsupported, type HostDriver, type OnWait } from './hosts.js';

export function schedulesHost(store: SessionStore): HostDriver {
  const sessionId = freshSessionId('schedule');
  // The file's schedulers share the store: each claims only the ticks of the agents it was given.
  const agent = `agent-${sessionId}`;
  const { failed, fail } = failureSink();
  let config: AgentConfig;
  let onWait: OnWait;
  let scheduler: Scheduler | undefined;
  let ended!: (tick: ScheduleTick) => void;
  const tickEnded = new Promise<ScheduleTick>((resolve) => (ended = resolve));
  const start = async () => {
    scheduler = await startScheduler({
      store,
      agents: { [agent]: createAgentMachine(config) },
      maxIdleMs: 50,
      // A tick let go at a crash is continued by the next scheduler: its end is the one that counts.
      onTick: (tick) => tick.scheduleId === sessionId && tick.outcome !== 'Released' && ended(tick),
      // Other runs' schedules on the shared store are theirs to fire.
      onError: (error) => UnknownScheduleAgentError.isInstance(error) || fail(error),
    });
  };
  return {
    async start(given, prompt, wait) {
      config = given;
      onWait = wait;
      await schedule(store, { id: sessionId, session: sessionId, agent, input: prompt, at: new Date() });
      await start();
    },
    steer: async () => {
      throw new Unsupported('a tick sends its input and runs in the scheduler, which takes no message while it runs');
    },
    cancel: async () => {
      throw new Unsupported('nobody but the scheduler holds a tick’s run: it cancels it past runTimeoutMs');
    },
    async crash(fresh) {
      await scheduler!.stop({ graceMs: 0 });
      config = fresh;
      await start();
    },
    async result() {
      const tick = await Promise.race([tickEnded, failed]);
      if (tick.outcome !== 'Waiting') {
        const result = storedResult(await storedContext(store, sessionId));
        if (tick.outcome !== result.outcome.type) throw new Error(`the tick ended ${tick.outcome}, the store says ${result.outcome.type}`);
        return result;
      }
      // The run waits for someone, as the tick says: answered through the session, where it goes on.
      if (!/^the run (waits for|is paused by its budget)/.test(tick.error ?? '')) throw new Error(`the tick ended Waiting with '${tick.error}'`);
      let opened!: (session: DurableSession) => void;
      const ready = new Promise<DurableSession>((resolve) => (opened = resolve));
      // A wait the resumed run asks again as it starts is answered once the session is open.
      const send = (event: AgentEvent) => void ready.then((held) => held.send(event)).catch(fail);
      const session = await DurableSession.open({ machine: createAgentMachine(config), store, sessionId, attach: (actor) => answerFrom(actor, onWait, send, fail) });
      opened(session);
      try {
        const output = await Promise.race([session.whenIdle(), failed]);
        if (!output) throw new Error(`no run stored after the tick waited (${tick.error})`);
        return normalize(output, null);
      } finally {
        await session.close();
      }
    },
    async dispose() {
      await scheduler?.stop({ graceMs: 0 });
    },
  };
}
