import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { InvalidFeedError } from '../../errors.js';
import { parseHistory } from '../../brain/history.js';
import { UserMessageSchema, type Message, type Policy, type UserMessage } from '../../schemas.js';
import type { AgentInput } from '../protocol/actor-types.js';
import { ScopeSchema } from '../protocol/scope.js';
import { checkedPolicy, type CompiledAgent } from './compile.js';
import { freshAgentContext, type AgentContext } from './context.js';
import { NO_USAGE, asUserMessage } from './run-rules.js';

// Built once: an actor's input is checked on every run.
const SessionIdSchema = z.string().min(1).optional();
const InputScopeSchema = ScopeSchema.optional();
const PromptSchema = z.union([z.string(), UserMessageSchema]).optional();

/** Refusals by the context they ended, for the hosts that throw them (DurableSession, AgentStepper). */
const refusals = new WeakMap<object, InvalidFeedError>();

/** A check's error as one line: a zod error's first issue with its path, any other error's message. */
function problemOf(error: unknown): string {
  if (error instanceof z.ZodError) {
    const issue = error.issues[0]!;
    return issue.path.length > 0 ? `${issue.path.join('.')}: ${issue.message}` : issue.message;
  }
  // A feed error names its feed ('history: …'): the field already says where.
  if (error instanceof InvalidFeedError) return error.message.slice(error.feed.length + 2);
  return error instanceof Error ? error.message : String(error);
}

/** Runs one field's check; its throw becomes an `InvalidFeedError` naming `input.<field>`. */
function checked<T>(field: string, check: () => T): T {
  try {
    return check();
  } catch (error) {
    throw new InvalidFeedError(`input.${field}`, problemOf(error));
  }
}

/**
 * The context an actor given fresh input (not a stored state) starts from, each field checked
 * where it enters: `sessionId` a string, `scope` a memory scope (`ScopeSchema`), `prompt` a string or a user message, `history` a coherent
 * conversation (as `LoopMachine` checks it), `policy` one the agent's pruning allows.
 *
 * A field that fails does not throw: XState catches a throw from the context factory at
 * `createActor`, and `start()` re-throws it from a timer when nobody has subscribed yet, which
 * ends the Node process whatever the caller catches. The actor ends at once instead: done, its
 * output `Failed(InvalidInput)` with the `InvalidFeedError`'s message (`input.history: …`), and
 * nothing runs.
 */
export function freshContext(agent: CompiledAgent, input: AgentInput | void): AgentContext {
  try {
    if (input !== undefined && (typeof input !== 'object' || input === null || Array.isArray(input))) throw new InvalidFeedError('input', 'must be an object');
    // Without one, an id of this actor's own: the idempotency keys the run hands out (the model
    // call's `Idempotency-Key`, a tool's `ctx.idempotencyKey`) are built from it, and two actors
    // sharing one (each user's agent embedded in a product's statechart) sent the same keys, so an
    // API that deduplicates answered the second user with the first one's result.
    const sessionId = checked('sessionId', () => SessionIdSchema.parse(input?.sessionId)) ?? `actor-${randomUUID()}`;
    const scope = checked('scope', () => InputScopeSchema.parse(input?.scope));
    const prompt: string | UserMessage | undefined = checked('prompt', () => {
      if (!PromptSchema.safeParse(input?.prompt).success) throw new Error("must be a string or a user message { role: 'user', content: string }");
      return input?.prompt;
    });
    const history: Message[] = input?.history === undefined ? [] : checked('history', () => parseHistory(input.history));
    const policy: Policy = input?.policy === undefined ? agent.defaultPolicy : checked('policy', () => checkedPolicy(input.policy, agent.pruning, (message) => new Error(message), ''));
    return freshAgentContext({ sessionId, scope, history, policy, queued: prompt === undefined ? null : asUserMessage(prompt) });
  } catch (error) {
    const refusal = error instanceof InvalidFeedError ? error : new InvalidFeedError('input', problemOf(error));
    const lastRun = { outcome: { type: 'Failed' as const, error: { type: 'InvalidInput' as const, message: refusal.message } }, usage: NO_USAGE };
    refusals.set(lastRun, refusal);
    return { ...freshAgentContext({ sessionId: 'session', history: [], policy: agent.defaultPolicy, queued: null }), once: true, lastRun };
  }
}

/** An actor whose input was refused (see `freshContext`): it ends before any run. */
export const inputRefused = (context: AgentContext): boolean =>
  context.runIndex === 0 && context.lastRun?.outcome.type === 'Failed' && context.lastRun.outcome.error.type === 'InvalidInput';

/**
 * The typed error an actor's input was refused with, for a host that throws where the actor
 * cannot (`DurableSession.open`, `new AgentStepper`); null when the input was taken.
 */
export const inputRefusal = (context: AgentContext): InvalidFeedError | null => (context.lastRun && refusals.get(context.lastRun)) ?? null;
