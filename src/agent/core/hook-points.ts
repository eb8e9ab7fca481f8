/**
 * The hook points of an agent with operations, as the loop reaches them. The loop measures what
 * the operations' prompt parts add to the next call, opens the point after a model's reply with
 * that reply, and closes every point when a run stops; what runs there is the operations' own
 * (see operations). `compile` gives an agent with operations its `points`, so an agent without
 * any runs none of their code and the loop names no operation.
 */
import type { Message } from '../../schemas.js';
import type { AgentContext } from './context.js';

/** The operations' state as the context keeps it: their slices, the point in progress, a yield the run waits on. */
type OperationsState = AgentContext['operations'];

/** What a prompt part reads of the run, besides its own slice. */
export interface PromptRead {
  readonly sessionId: string;
  readonly scope?: string | undefined;
  readonly turn: number;
  readonly messages: readonly Message[];
}

/** How the loop reaches an agent's operations. */
export interface HookPoints {
  /** The prompt parts the next call carries, in list order; throws the error of a part that failed. */
  promptParts(read: PromptRead, slices: OperationsState['slices']): Message[];
  /** The point after a reply, opened with that reply (the state as it was when no operation hooks it). */
  afterReply(state: OperationsState, key: string, reply: unknown): OperationsState;
  /** A run that stops leaves no point open and nobody waiting. */
  close(state: OperationsState): OperationsState;
}
