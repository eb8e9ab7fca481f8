/**
 * The Restate session object as a host of the conformance matrix (test/distributed/matrix.test.ts
 * runs it against a real server and one worker process). The worker
 * (test/distributed/fixtures/matrix-worker.ts) builds each scenario's agent from the scenario
 * itself, as a deployment builds its agent, and serves it as the object `matrix_<scenario>`; the
 * `config` handed to `start` is not sent anywhere (a config of functions does not cross a process),
 * its `probe` is filled from the worker's (test/distributed/support/matrix-probe.ts).
 *
 * Everything else goes through Restate's ingress as any client's calls would: `send` enqueued,
 * the event stream polled with a cursor, each wait it announces answered with the handler that
 * takes it (`approve` / `deny`, `decideDoubt`, `resumeOperation`; a budget raise is the budget
 * operation's resume, the session object having no handler of its own for `budget.raise`),
 * `steer` and `cancel` posted, the outcome the invocation's reply, the messages `transcript`.
 * A crash is a SIGKILL of the worker while the latch tool runs and a new worker on the same port:
 * Restate retries the invocation there.
 */
import { APPROVALS_OPERATION } from '../../../src/agent/approvals/approval-events.js';
import type { ApprovalRequest } from '../../../src/agent/approvals/approval-binding.js';
import { BUDGET_OPERATION } from '../../../src/agent/budget/budget-pause.js';
import type { AgentEvent } from '../../../src/agent/protocol/agent-event.js';
import type { AgentOutput } from '../../../src/agent/protocol/actor-types.js';
import type { StreamedEvent } from '../../../src/restate/channel.js';
import type { SessionSummaryReply } from '../../../src/restate/session-object.js';
import type { Message } from '../../../src/schemas.js';
import { IngressClient } from '../../distributed/support/ingress.js';
import { matrixObjectName, probeClient } from '../../distributed/support/matrix-probe.js';
import { eventFor, failureSink, freshSessionId, normalize, type HostDriver, type OnWait } from './hosts.js';
import type { FeatureId, Probe, Wait } from './scenarios.js';

/** What the driver needs of the test's server and worker. */
export interface RestateWorkerLink {
  readonly ingressUrl: string;
  /** The worker's probe side door (`PROBE_PORT`). */
  readonly probeUrl: string;
  /** SIGKILLs the worker and starts another on the same ports (the deployment Restate knows). */
  restartWorker(): Promise<void>;
}

const POLL_MS = 20;
/** 30 s of polls at most: runCell gives a run 10 s. */
const MAX_POLLS = 1_500;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The handler of the session object that takes `event`, and its payload. */
function handlerCall(event: AgentEvent): { handler: string; body: unknown } {
  const { type, ...body } = event as AgentEvent & Record<string, unknown>;
  if (type === 'approve' || type === 'deny') return { handler: type, body };
  if (type === 'doubt.decide') return { handler: 'decideDoubt', body };
  if (type === 'operation.resume') return { handler: 'resumeOperation', body };
  // The same change as `budget.raise` (src/agent/budget/budget-pause.ts).
  if (type === 'budget.raise') return { handler: 'resumeOperation', body: { operation: BUDGET_OPERATION, payload: { budget: body.budget } } };
  throw new Error(`the session object has no handler for ${type}`);
}

/** The waits an event of the stream announces, as the in-process hosts read an actor's. */
function waitsIn(event: StreamedEvent['event']): Wait[] {
  const requests = () => (event.requests ?? []) as ApprovalRequest[];
  if (event.type === 'approval.requested') return requests().map((request) => ({ kind: 'approval', request }));
  if (event.type === 'tool.inDoubt') return requests().map((request) => ({ kind: 'doubt', request }));
  if (event.type !== 'operation.yielded') return [];
  const operation = String(event.operation);
  const reason = String(event.reason);
  const payload = event.payload as { resumeAt?: unknown } | null;
  // Approvals yield as an operation too (answered by their requests); a usage limit resumes itself.
  if (operation === APPROVALS_OPERATION || (operation === BUDGET_OPERATION && typeof payload?.resumeAt === 'number')) return [];
  return [operation === BUDGET_OPERATION ? { kind: 'budget', limit: reason } : { kind: 'operation', operation, reason }];
}

/** One scenario's run on the worker's `matrix_<scenario>` object, in a session of its own. */
export function restateHost(link: RestateWorkerLink, scenario: FeatureId): HostDriver {
  const client = new IngressClient(link.ingressUrl, matrixObjectName(scenario));
  const probes = probeClient(link.probeUrl);
  const sessionId = freshSessionId('restate');
  const events: { type: string; id?: string }[] = [];
  const { failed, fail } = failureSink();
  const stop = new AbortController();
  let invocation: string | undefined;
  let ended = false;
  let probe: Probe | undefined;
  let worker = 0;
  let cancelled = false;

  /** `local` follows the worker's probe: reached when the worker's latch is, released into it while that worker lives. */
  const follow = (local: Probe) => {
    const mine = ++worker;
    probe = local;
    probes.reached(scenario, stop.signal).then(() => local.reach(), () => {});
    // After a cancel the worker's latch ends by its abort alone: this host's cancel travels (posted
    // to the object, taken by the run's invocation), and a latch released meanwhile could finish
    // first, its result then kept as one that exists when the run ends (docs/agent/cancel.md).
    void local.released.then(() => (mine === worker && !stop.signal.aborted && !cancelled ? probes.release(scenario) : undefined)).catch(fail);
  };

  /** Reads the event stream from the start, answering each wait it announces with the script's answer. */
  const pump = async (onWait: OnWait) => {
    let cursor = 0;
    for (let poll = 0; poll < MAX_POLLS && !stop.signal.aborted; poll++) {
      const page = await client.ok<{ events: StreamedEvent[]; next: number }>(sessionId, 'events', { cursor, limit: 1000 });
      for (const { event } of page.events) {
        events.push({ type: event.type, ...(typeof event.id === 'string' && { id: event.id }) });
        for (const wait of waitsIn(event)) {
          const { handler, body } = handlerCall(eventFor(wait, onWait(wait)));
          await client.ok(sessionId, handler, body);
        }
      }
      cursor = page.next;
      await sleep(POLL_MS);
    }
  };

  return {
    async start(_config, prompt, onWait, local) {
      follow(local);
      invocation = await client.enqueue(sessionId, 'send', { message: prompt });
      pump(onWait).catch(fail);
    },
    async steer(message) {
      await client.ok(sessionId, 'steer', { message });
    },
    async cancel() {
      cancelled = true;
      await client.ok(sessionId, 'cancel', {});
    },
    async crash(_config, local) {
      await link.restartWorker();
      follow(local);
    },
    async result() {
      const reply = await Promise.race([client.attach<SessionSummaryReply>(invocation!, 30_000), failed]);
      ended = true;
      if (!reply.outcome) throw new Error(`the send reply has no outcome: ${JSON.stringify(reply)}`);
      // The run's events reach its channel after its last step: read on until its end is there.
      for (let poll = 0; !events.some((event) => event.type === 'run.finished'); poll++) {
        if (poll === 250) throw new Error(`no run.finished on the event stream after 5 s: ${events.map((event) => event.type).join(', ')}`);
        await Promise.race([sleep(POLL_MS), failed]);
      }
      const messages = await client.ok<Message[]>(sessionId, 'transcript');
      const remote = await probes.state(scenario);
      probe!.ran.push(...remote.ran);
      probe!.modelCalls = remote.modelCalls;
      // The reply's outcome is the stored run's, as JSON.
      return normalize({ outcome: reply.outcome as AgentOutput['outcome'], messages }, events);
    },
    async dispose() {
      stop.abort();
      // A run left going (a check that threw, a timeout) is cancelled: the worker serves the next scenarios.
      if (invocation && !ended) await client.call(sessionId, 'cancel', {}, 5_000).catch(() => {});
    },
  };
}
