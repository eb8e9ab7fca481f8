import { matchesState, type StateValue } from 'xstate';
import type { AgentActor } from '../../machines/agent.machine.js';
import type { AgentContext } from '../agent/core/context.js';
import type { AgentEmitted } from '../agent/protocol/actor-types.js';
import { SubagentTree } from '../agent/hosts/subagent-tree.js';
import { waitsForSomeone } from '../agent/hosts/waiting.js';

/**
 * What a tick's run stands still for once it waits for someone outside it: itself
 * (`waitsForSomeone`), or subagents its running calls wait on (`SubagentTree`, as the chat
 * handler reads them). A scheduler speaks for no one, so the tick ends there (`Waiting`) instead
 * of holding its lease and a run slot until `runTimeoutMs` cancels the run and its question with it.
 */

/** One line saying what one session waits for, or null when it does not wait for anyone. */
export function runWaitsFor(snapshot: { value: unknown; context: AgentContext }): string | null {
  if (!waitsForSomeone(snapshot)) return null;
  const { context } = snapshot;
  if (context.operations.waiting) return `the run waits for operation '${context.operations.waiting.operation}' to be resumed (${context.operations.waiting.reason})`;
  if (matchesState({ Running: 'BudgetPaused' }, snapshot.value as StateValue)) return 'the run is paused by its budget: send budget.raise or seal to its session';
  const doubt = context.doubt?.waiting ?? [];
  if (doubt.length > 0) return `the run waits for a decision on call(s) in doubt ${doubt.join(', ')}`;
  const calls = context.approvals.waiting.filter((id) => !Object.hasOwn(context.approvals.decisions, id));
  return `the run waits for an approval of call(s) ${calls.join(', ')}`;
}

/**
 * Follows one tick's session and its subagents: `attach` it to the session's actor before it
 * starts (`DurableSession.open({ attach })`), then `waits()` tells what the run waits for.
 */
export class RunWatch {
  readonly #sessionId: string;
  #tree: SubagentTree | undefined;
  #root: AgentActor | undefined;
  readonly #hearing = new Set<() => void>();

  constructor(sessionId: string) {
    this.#sessionId = sessionId;
  }

  readonly attach = (actor: AgentActor): void => {
    this.#root = actor;
    const tree = new SubagentTree(this.#sessionId, actor, { event: () => {}, changed: () => this.#tell() });
    this.#tree = tree;
    actor.on('*', (event: AgentEmitted) => tree.rootEvent(event));
    actor.subscribe(() => this.#tell());
  };

  /** What the run waits for (its own wait, or each subagent's its calls wait on), or null. */
  waits(): string | null {
    if (!this.#root) return null;
    const own = runWaitsFor(this.#root.getSnapshot());
    if (own !== null || !this.#tree) return own;
    const waiting = this.#tree.waiting();
    if (waiting.length === 0) return null;
    return waiting.map(({ via, snapshot }) => `a subagent of call ${via}: ${runWaitsFor(snapshot)}`).join('; ');
  }

  /** Resolves with what the run waits for once it does; `stop` the returned wait when done with it. */
  until(): { waiting: Promise<string>; stop: () => void } {
    let look = () => {};
    const waiting = new Promise<string>((resolve) => {
      look = () => {
        const waits = this.waits();
        if (waits !== null) resolve(waits);
      };
    });
    this.#hearing.add(look);
    look();
    return { waiting, stop: () => this.#hearing.delete(look) };
  }

  /** Lets the session's actors go. */
  stop(): void {
    this.#hearing.clear();
    this.#tree?.stop();
  }

  #tell(): void {
    for (const look of this.#hearing) look();
  }
}
