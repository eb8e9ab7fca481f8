import type { AgentActor } from '../../machines/agent.machine.js';
import type { Message } from '../schemas.js';

/**
 * A run's messages printed as they join its conversation, each once, at its position: the run's
 * pending messages (a reply, a tool result) as soon as the brain holds them, then any the commit
 * adds. `sessions send` and `resume` showed nothing until the run ended before, which with a real
 * model looked like a hung terminal.
 */
export interface LiveTranscript {
  /**
   * Prints what is left and stops watching. Returns the committed messages from the first
   * position on when they are not what was printed (an answer a guardrail or an output check
   * replaced, a compaction), else an empty list.
   */
  finish(): { position: number; messages: readonly Message[] };
}

export function liveTranscript(actor: Pick<AgentActor, 'getSnapshot' | 'subscribe'>, from: number, print: (message: Message, position: number) => void): LiveTranscript {
  const printed: Message[] = [];
  const catchUp = () => {
    const { history, pending } = actor.getSnapshot().context.brain.context;
    const length = history.length + pending.length;
    for (let position = from + printed.length; position < length; position++) {
      const message = position < history.length ? history[position]! : pending[position - history.length]!;
      printed.push(message);
      print(message, position);
    }
  };
  catchUp();
  const subscription = actor.subscribe({ next: catchUp, error: () => {} });
  return {
    finish() {
      subscription.unsubscribe();
      const committed = actor.getSnapshot().context.brain.context.history.slice(from);
      const same = committed.length >= printed.length && printed.every((message, i) => JSON.stringify(message) === JSON.stringify(committed[i]));
      if (same) {
        for (let i = printed.length; i < committed.length; i++) print(committed[i]!, from + i);
        return { position: from, messages: [] };
      }
      return { position: from, messages: committed };
    },
  };
}
