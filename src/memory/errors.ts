import { LoopchartError } from '../errors.js';

/**
 * A memory scope that cannot be a key: not a string, empty, over 200 characters, or with control
 * characters (see `ScopeSchema`).
 *
 * @example
 * ```ts
 * import { exportScope, InvalidScopeError } from 'loopchart/memory';
 * try {
 *   await exportScope(store, '');
 * } catch (error) {
 *   if (InvalidScopeError.isInstance(error)) console.error(error.message); // invalid memory scope: must not be empty
 * }
 * ```
 */
export class InvalidScopeError extends LoopchartError {
  constructor(problem: string) {
    super('InvalidScope', `invalid memory scope: ${problem}`);
  }
}

/**
 * A working-memory update longer than the memory's bound (`working.maxChars`): refused, the stored
 * document unchanged. The model is told so as the tool's result, and can write a shorter one.
 *
 * @example
 * ```ts
 * import { MemoryTooLargeError } from 'loopchart/memory';
 * const error = new MemoryTooLargeError(5_200, 4_000);
 * console.log(error.message); // working memory update refused: 5200 characters, the bound is 4000; keep what matters and write it again shorter
 * ```
 */
export class MemoryTooLargeError extends LoopchartError {
  readonly chars: number;
  readonly maxChars: number;
  constructor(chars: number, maxChars: number) {
    super('MemoryTooLarge', `working memory update refused: ${chars} characters, the bound is ${maxChars}; keep what matters and write it again shorter`);
    this.chars = chars;
    this.maxChars = maxChars;
  }
}

/**
 * The `embed` function given to the memory threw, did not answer within its timeout, or returned
 * something that is not a vector of the memory's length. Recall goes on with full-text search
 * alone; the message says what went wrong (never the text that was being embedded).
 *
 * @example
 * ```ts
 * import { MemoryEmbedError } from 'loopchart/memory';
 * const error = new MemoryEmbedError('returned 3 numbers, expected 1536');
 * console.log(error.message); // memory embed failed: returned 3 numbers, expected 1536
 * ```
 */
export class MemoryEmbedError extends LoopchartError {
  constructor(problem: string, options?: { cause?: unknown }) {
    super('MemoryEmbed', `memory embed failed: ${problem}`, options);
  }
}
