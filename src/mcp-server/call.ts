import { runInFlight, type AgentOutput } from '../agent/protocol/actor-types.js';
import type { ApprovalRequest } from '../agent/approvals/approval-binding.js';
import { nobodyResumes } from '../agent/hosts/unattended.js';
import { DurableSession } from '../sessions/durable-session.js';
import { ApprovalRefusedError, type Verdict } from '../sessions/stored-decision.js';
import type { SessionStore } from '../stores/session-store.js';
import type { ServedAgent } from './agents.js';

/**
 * One tools/call as a run of a durable session: opened (or resumed) on the store, the call's
 * prompt sent unless it attaches to a run already made, driven to its end with the client's
 * progress, cancellation, approvals and the call's timeout.
 */

/** What a person answered through the client, or `gone`: nobody can be asked (the client left). */
export type ApprovalAnswer = Verdict | 'gone';

/**
 * What the client is asked: whether a call that needs approval may run, or whether a call in
 * doubt (cut off by a restart, its effect unknown) runs again. Yes to the second is `rerun`, no
 * (or nobody able to answer) is `fail` with the reason: never run again on a guess.
 */
export type Question = 'approval' | 'doubt';

/** Why a call in doubt fails when the client said no without a reason. */
const NOT_RUN_AGAIN = 'the MCP client did not run it again after it was cut off';

export interface CallPlan {
  served: ServedAgent;
  prompt: string;
  store: SessionStore;
  sessionId: string;
  /** The caller's scope (see `CallerSessions`), stored with a new session and checked on a stored one. */
  scope: string;
  /**
   * A call repeated under the same idempotency key: a run the session already made is the answer
   * (in flight: waited for; ended: its outcome), and the prompt goes only to a session that never ran.
   */
  repeat: boolean;
}

export interface CallHooks {
  /** Aborts when the client cancels the request or its connection closes. */
  signal: AbortSignal;
  /** Whether the connection is gone (told apart from a cancel once the abort has been seen). */
  disconnected(): boolean;
  /** On a closed connection, leave the run going (stored) instead of cancelling it. */
  keepOnDisconnect: boolean;
  timeoutMs: number;
  /** Told once per finished turn. */
  progress(turn: number): void;
  approve(request: ApprovalRequest, signal: AbortSignal, question: Question): Promise<ApprovalAnswer>;
}

/** How the call ended: the run's output, or why the call stopped waiting for it. */
export type CallEnd =
  | { type: 'output'; output: AgentOutput | null; attached: boolean }
  | { type: 'timeout'; output: AgentOutput | null }
  /** The client left and the run is kept in the store (still going, or waiting for a person). */
  | { type: 'left' };

/** How long a cancelled run may take to come to rest before the call gives up on it. */
const CANCEL_GRACE_MS = 30_000;

export async function runCall(plan: CallPlan, hooks: CallHooks): Promise<CallEnd> {
  const run = new AbortController();
  let opened!: (session: DurableSession) => void;
  const whenOpen = new Promise<DurableSession>((resolve) => (opened = resolve));
  let approvals = Promise.resolve();
  // A decision that could not be stored (the store failed or was locked past its timeout) ends the
  // call with that error; left in the chain it would be an unhandled rejection, which ends the process.
  let failDecision!: (error: unknown) => void;
  const decisionFailed = new Promise<never>((_, reject) => (failDecision = reject));
  decisionFailed.catch(() => {});
  let abandon!: () => void;
  const abandoned = new Promise<'left'>((resolve) => (abandon = () => resolve('left')));

  const session = await DurableSession.open({
    machine: plan.served.agent,
    store: plan.store,
    sessionId: plan.sessionId,
    scope: plan.scope,
    // Listening before the actor starts: a resumed run that already waits for a person asks again at once.
    attach: (actor) => {
      actor.on('turn.finished', (event) => hooks.progress(event.turn));
      actor.on('approval.requested', ({ requests }) => {
        for (const request of requests) approvals = approvals.then(() => decide(request, 'approval')).catch(failDecision);
      });
      // A call the process before this one died in: asked as an approval is, decided as the chat does.
      actor.on('tool.inDoubt', ({ requests }) => {
        for (const request of requests) approvals = approvals.then(() => decide(request, 'doubt')).catch(failDecision);
      });
      // A budget paused for a raise, an operation yielded for its resume (the run's, or a child's
      // under `target`): no MCP client can send either, so the run is sealed, as runAgent does,
      // rather than holding the call until its timeout and then cancelling it.
      actor.on('operation.yielded', ({ operation, reason, payload, target }) => {
        if (!nobodyResumes(operation, payload)) return;
        const seal = { type: 'seal' as const, reason: `the '${operation}' operation yielded (${reason}) and an MCP client cannot resume it`, ...(target !== undefined && { target }) };
        void whenOpen
          .then((held) => {
            if (!run.signal.aborted) held.send(seal);
          })
          // Not sealed (the session failed meanwhile): the call ends as that failure, or at its timeout.
          .catch(() => {});
      });
    },
  });
  opened(session);

  // One request at a time, as a person answers: asked of the client, decided in the session.
  async function decide(request: ApprovalRequest, question: Question): Promise<void> {
    const held = await whenOpen;
    if (run.signal.aborted) return;
    const answer = await hooks.approve({ ...request }, run.signal, question);
    if (run.signal.aborted) return;
    // Nobody to ask: the call stays undecided in the store, for the client that attaches next.
    if (answer === 'gone') return abandon();
    if (question === 'doubt') {
      const { toolCallId, digest, run: runIndex } = request;
      const by = answer.by !== undefined ? { by: answer.by } : {};
      const verdict = answer.approved ? { action: 'rerun' as const } : { action: 'fail' as const, reason: answer.reason ?? NOT_RUN_AGAIN };
      // A decision that no longer applies is refused by the run (doubt.refused): the session says how it went.
      held.send({ type: 'doubt.decide', toolCallId, digest, run: runIndex, ...verdict, ...by });
      return;
    }
    await held.decide(request, answer).catch((error: unknown) => {
      // Decided elsewhere meanwhile (another process, a run that moved on): the session says how it went.
      if (!ApprovalRefusedError.isInstance(error)) throw error;
    });
  }

  let stuck!: () => void;
  const stopped = new Promise<'stuck'>((resolve) => (stuck = () => resolve('stuck')));
  let grace: NodeJS.Timeout | undefined;
  const cancel = () => {
    if (grace) return;
    grace = setTimeout(stuck, CANCEL_GRACE_MS);
    session.send({ type: 'cancel' });
  };
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    cancel();
  }, hooks.timeoutMs);
  const onAbort = () =>
    // The SDK aborts the handler before it marks the connection closed: look once it has.
    setImmediate(() => {
      // The call ended meanwhile: its session is closed, and a cancel sent to it would throw here, uncaught.
      if (run.signal.aborted) return;
      if (hooks.disconnected() && hooks.keepOnDisconnect) return;
      cancel();
    });
  hooks.signal.addEventListener('abort', onAbort, { once: true });
  try {
    const { runIndex, brain } = session.actor.getSnapshot().context;
    const inFlight = runInFlight(brain);
    // A repeat's answer is the run its first call made. Any other call on a run nobody drives (its
    // process died, or its client left) drives that run to its end first and then asks its own
    // question: answering it with the earlier run's end would answer another question.
    const attached = plan.repeat && (inFlight || runIndex > 0);
    if (hooks.signal.aborted) onAbort();
    if (inFlight && !attached) {
      const earlier = await Promise.race([session.whenIdle(), abandoned, stopped, decisionFailed]);
      if (earlier === 'left') return { type: 'left' };
      if (earlier === 'stuck') return { type: 'timeout', output: null };
      // Cancelled meanwhile (the client's cancel, the call's timeout): its own question is not asked.
      if (grace) return timedOut ? { type: 'timeout', output: earlier } : { type: 'output', output: earlier, attached: true };
    }
    if (!attached) session.send({ type: 'input', message: plan.prompt });
    const ended = await Promise.race([session.whenIdle(), abandoned, stopped, decisionFailed]);
    if (ended === 'left') return { type: 'left' };
    if (ended === 'stuck') return { type: 'timeout', output: null };
    return timedOut ? { type: 'timeout', output: ended } : { type: 'output', output: ended, attached };
  } finally {
    clearTimeout(timer);
    clearTimeout(grace);
    hooks.signal.removeEventListener('abort', onAbort);
    run.abort(new Error('the call ended'));
    await session.close();
  }
}
