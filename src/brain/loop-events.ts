import type { FinishReason } from '../model.js';
import type {
  AssistantMessage,
  LoopErrorInfo,
  Message,
  Policy,
  ToolMessage,
  UserMessage,
} from '../schemas.js';

/**
 * Every event the brain understands. `next` asks for a decision and carries the policy;
 * the rest are the seed's feeds, named after the facade methods that send them.
 */
export type LoopEvent =
  | { type: 'next'; policy: Policy }
  | { type: 'acceptInput'; message: UserMessage }
  | {
      type: 'modelResponse';
      response: AssistantMessage;
      contextTokens: number;
      availableTools: readonly string[];
      /** Why the model stopped; anything but 'stop' is carried into a Completed outcome. */
      finishReason?: FinishReason | undefined;
    }
  | {
      type: 'toolResults';
      messages: readonly ToolMessage[];
      /**
       * Calls among them that never finished (answered "interrupted" by a seal or a cancel): they
       * keep the transcript coherent but are not tool calls made (`totalToolCalls`, the budget's count).
       */
      unfinished?: readonly string[] | undefined;
    }
  | {
      type: 'compactionResult';
      compacted: readonly Message[];
      before: number;
      after: number;
      /** Decides whether a threshold stall still fits below the emergency line. */
      contextWindow: number;
    }
  | { type: 'compactionNoop'; before: number; after: number; contextWindow: number }
  | { type: 'inject'; message: Message }
  | { type: 'setContextTokens'; tokens: number }
  | { type: 'cancel' }
  | { type: 'fail'; error: LoopErrorInfo }
  | { type: 'seal'; reason: string }
  | { type: 'steer'; message: UserMessage }
  | { type: 'commitPending' }
  | { type: 'discardPending' }
  | { type: 'salvagePending' }
  | { type: 'rewindTo'; len: number }
  | { type: 'adoptPruned'; messages: readonly Message[] };

export type LoopEventType = LoopEvent['type'];
export type LoopEventOf<T extends LoopEventType> = Extract<LoopEvent, { type: T }>;
