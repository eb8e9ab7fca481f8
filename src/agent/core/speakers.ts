/**
 * Who speaks in a run, as the loop reads it. An agent speaks for itself; an agent with handoffs
 * hands its conversation from one agent to another (see handoffs), each with its instructions,
 * tools and model, and each shown the conversation its own way. `compile` gives such an agent its
 * `speakers`, so the loop names no feature to ask who speaks now.
 */
import { z } from 'zod';
import type { Message } from '../../schemas.js';
import type { Offered } from './offered.js';

/** Which agent has the conversation, and who handed it over (the context's `agent`; absent: the entry agent). */
export const ActiveAgentSchema = z.object({ name: z.string(), from: z.string() });
export type ActiveAgent = z.infer<typeof ActiveAgentSchema>;

/** The active agent as the context keeps it. */
export type ActiveSpeaker = ActiveAgent | undefined;

/** One agent as the loop uses it while it speaks. */
export interface Speaker {
  readonly name: string;
  readonly instructions: Message | undefined;
  readonly instructionsTokens: number;
  /** What its model is offered (its tools, the session's, its transfers) and accepts. */
  readonly offered: Offered;
  /** Its model's index in the driver's model list; null: the entry agent's models. */
  readonly model: number | null;
}

/** The agents of a run that hands its conversation over. */
export interface Speakers {
  /** The agent a run starts with (the one whose tool sources the run lists). */
  readonly entry: string;
  /** The agent that speaks now. */
  of(active: ActiveSpeaker): Speaker;
  /** The conversation as the speaking agent is shown it. */
  present(active: ActiveSpeaker, messages: readonly Message[]): readonly Message[];
}
