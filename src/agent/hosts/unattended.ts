import { z } from 'zod';
import type { AgentActor } from '../../../machines/agent.machine.js';
import type { AgentEmitted } from '../protocol/actor-types.js';
import { parseOptions } from '../../known-keys.js';
import { readAnswer, thrownMessage } from '../../read-answer.js';
import { decisionEvent, type ApprovalRequest } from '../approvals/approval-binding.js';
import { APPROVALS_OPERATION } from '../approvals/approval-events.js';
import { BUDGET_OPERATION } from '../budget/budget-pause.js';
import { timedCheck } from '../core/timed-check.js';

/**
 * What `runAgent` and `streamAgent` do where a run waits for someone. They hold the run's only
 * handle, so nobody else can send the answer: a call that needs approval is put to `approve`
 * (or denied when there is none), and a run an operation yielded is sealed. Without this such a
 * run would wait forever.
 */

/** How long `approve` may take over one call before the call is denied. */
export const DEFAULT_APPROVE_TIMEOUT_MS = 10 * 60_000;

/** The reason a call is denied when the run was given no `approve` function. */
export const NO_APPROVER_REASON =
  'runAgent was given no approve function (pass `approve` to decide, or run the agent as an actor or a DurableSession to decide later)';

const AnswerSchema = z.union([
  z.boolean(),
  z.object({ approved: z.boolean(), reason: z.string().optional(), always: z.boolean().optional(), by: z.string().max(200).optional() }),
]);

/**
 * What `approve` answers for one call: `true`/`false`, or a verdict with a reason (the model
 * reads it with a denial), `always` (the same decision for the rest of the run) and `by`.
 *
 * @example
 * ```ts
 * import type { ApprovalAnswer } from 'loopchart';
 *
 * const answer: ApprovalAnswer = { approved: false, reason: 'Not on Fridays.' };
 * ```
 */
export type ApprovalAnswer = z.input<typeof AnswerSchema>;

/**
 * Decides a call that needs approval during `runAgent` or `streamAgent`. Its signal aborts when
 * the run ends or the decision times out (`approveTimeoutMs`); a throw, a bad answer or a
 * timeout denies the call, with the reason.
 *
 * @example
 * ```ts
 * import { runAgent, type ApproveFunction } from 'loopchart';
 *
 * const approve: ApproveFunction = (request) => request.toolName !== 'deleteFile';
 * const { outcome } = await runAgent({ model, tools, prompt: 'Tidy up the folder.', approve });
 * ```
 */
export type ApproveFunction = (request: ApprovalRequest, options: { signal: AbortSignal }) => ApprovalAnswer | Promise<ApprovalAnswer>;

const OptionsSchema = z.object({
  /** Decides each call that needs approval; without it such calls are denied (`NO_APPROVER_REASON`). */
  approve: z.custom<ApproveFunction>((value) => typeof value === 'function', { error: 'approve must be a function' }).optional(),
  /** How long `approve` may take over one call (default 10 minutes); then the call is denied. */
  approveTimeoutMs: z.number().positive({ error: 'approveTimeoutMs must be a positive number of ms' }).optional(),
});

/**
 * Answers a yield nobody else resumes before it is sealed: true when it took it (an evaluation
 * sends the raise its recording holds for a budget's pause), false to seal it.
 *
 * @example
 * ```ts
 * const raiseOnce: AnswerYield = ({ operation }) => operation === 'budget';
 * ```
 */
export type AnswerYield = (yielded: Extract<AgentEmitted, { type: 'operation.yielded' }>) => boolean;

/** How `runAgent` answers the run's waits. */
export type UnattendedOptions = z.input<typeof OptionsSchema>;

/** What `approve` decided, as a verdict (see `decisionEvent`). */
type Verdict = Exclude<z.output<typeof AnswerSchema>, boolean>;

/** The verdict on one request: `approve`'s answer, or a denial that says why there is none. */
async function decide(request: ApprovalRequest, options: UnattendedOptions, run: AbortSignal): Promise<Verdict> {
  const { approve, approveTimeoutMs = DEFAULT_APPROVE_TIMEOUT_MS } = options;
  if (!approve) return { approved: false, reason: NO_APPROVER_REASON };
  let answer: unknown;
  try {
    // A copy: the decision names the call as shown, whatever the function does with its argument.
    answer = await timedCheck(run, approveTimeoutMs, (signal) => approve({ ...request }, { signal }), () => new Error(`no decision within ${approveTimeoutMs} ms`));
  } catch (error) {
    return { approved: false, reason: `the approve function failed: ${thrownMessage(error)}` };
  }
  // Read through readAnswer: a getter or Proxy trap that throws denies the call like any bad answer.
  const parsed = readAnswer(AnswerSchema, answer);
  if (!parsed.ok) return { approved: false, reason: `the approve function answered ${typeof answer}, not true, false or { approved } (${parsed.problem})` };
  return typeof parsed.value === 'boolean' ? { approved: parsed.value } : parsed.value;
}

/**
 * Whether a yield leaves the run waiting for someone who is not there. Not an approval wait
 * (answered through `approval.requested`) nor a provider's usage limit (it resumes on its own at
 * its stored time). A host that holds a run nobody else can resume (`runAgent`, an MCP call)
 * seals it on such a yield instead of waiting for ever.
 *
 * @example
 * ```ts
 * actor.on('operation.yielded', ({ operation, payload }) => {
 *   if (nobodyResumes(operation, payload)) actor.send({ type: 'seal', reason: 'nobody can resume it' });
 * });
 * ```
 */
export function nobodyResumes(operation: string, payload: unknown): boolean {
  if (operation === APPROVALS_OPERATION) return false;
  const resumeAt = (payload as { resumeAt?: unknown } | null | undefined)?.resumeAt;
  return !(operation === BUDGET_OPERATION && typeof resumeAt === 'number');
}

/**
 * Answers the waits of a run only this caller can reach; returns the function that stops it
 * (call it when the run ends: a decision still pending sees its signal abort). A yield nobody
 * resumes is sealed, unless `answerYield` takes it.
 *
 * @example
 * ```ts
 * const stop = answerWaits(actor, { approve: () => true });
 * actor.start();
 * // ... once the run is over:
 * stop();
 * ```
 */
export function answerWaits(actor: AgentActor, unchecked: UnattendedOptions, answerYield?: AnswerYield): () => void {
  const options = parseOptions(OptionsSchema, unchecked, 'answerWaits');
  // Made on the first request: most runs ask nobody.
  let run: AbortController | undefined;
  let ended = false;
  // One request at a time, in order: an approve function that asks a person asks one question at a time.
  let queue = Promise.resolve();
  const send = (event: Parameters<AgentActor['send']>[0]) => {
    if (!ended && actor.getSnapshot().status === 'active') actor.send(event);
  };
  const requested = actor.on('approval.requested', ({ requests }) => {
    const signal = (run ??= new AbortController()).signal;
    for (const request of requests) {
      queue = queue.then(async () => {
        send(decisionEvent(request, await decide(request, options, signal)));
      });
    }
  });
  const yielded = actor.on('operation.yielded', (event) => {
    const { operation, reason, payload, target } = event;
    if (!nobodyResumes(operation, payload) || answerYield?.(event)) return;
    // A child's wait (its path in `target`) can no more be resumed than the run's own: the seal goes
    // down to that child, whose call then gets its Sealed outcome, and the parent goes on.
    send({
      type: 'seal',
      reason: `the '${operation}' operation yielded (${reason}) and runAgent cannot resume it: run the agent as an actor or a DurableSession to send operation.resume`,
      ...(target !== undefined && { target }),
    });
  });
  return () => {
    ended = true;
    run?.abort(new Error('the run ended'));
    requested.unsubscribe();
    yielded.unsubscribe();
  };
}
