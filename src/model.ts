import type { AssistantMessage, FinishReason, Message, Usage } from './schemas.js';
import { LoopchartError } from './errors.js';

/** A tool as the model sees it: name, description and a JSON Schema for its arguments. */
export interface ToolDefinition {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

export type { FinishReason };

export type { Usage };

export interface ModelRequest {
  /** The whole conversation to send (history + pending), provider-valid. */
  messages: readonly Message[];
  tools: readonly ToolDefinition[];
  signal: AbortSignal;
  /** Stable across retries and across a restore that repeats this call. */
  idempotencyKey: string;
  /** Called with each streamed piece of assistant text, in order. */
  onTextDelta?: (delta: string) => void;
}

export interface ModelReply {
  message: AssistantMessage;
  finishReason: FinishReason;
  usage?: Usage;
}

/** Anything that can answer a model request: the scripted model, the AI SDK adapter, the HTTP adapter. */
export interface Model {
  readonly name: string;
  generate(request: ModelRequest): Promise<ModelReply>;
}

/**
 * A model call that failed. `retryable` says whether the driver's retry policy may try again;
 * `retryAfterMs` carries the provider's `retry-after` when it sent one.
 */
export class ModelError extends LoopchartError {
  readonly status: number | undefined;
  readonly retryable: boolean;
  readonly retryAfterMs: number | undefined;
  constructor(
    message: string,
    options: { status?: number; retryable: boolean; retryAfterMs?: number; cause?: unknown },
  ) {
    super('ModelError', message, { cause: options.cause });
    this.status = options.status;
    this.retryable = options.retryable;
    this.retryAfterMs = options.retryAfterMs;
  }
}
