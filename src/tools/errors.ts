import { LoopchartError } from '../errors.js';

/**
 * Two tools share a name: the model could not tell them apart, so a tool set refuses it. `givers`
 * says who gives the name when it is known (a run's listing names the agent's own tools and
 * each tool source).
 */
export class DuplicateToolError extends LoopchartError {
  readonly toolName: string;
  constructor(toolName: string, givers?: string) {
    super('DuplicateTool', `tool name "${toolName}" is used by more than one tool${givers ? `: ${givers}` : '; tool names must be unique'}`);
    this.toolName = toolName;
  }
}

/** A tool definition that no provider would accept (bad name, arguments not a JSON object...). */
export class InvalidToolError extends LoopchartError {
  readonly toolName: string;
  constructor(toolName: string, problem: string, options?: { cause?: unknown }) {
    super('InvalidTool', `tool "${toolName}": ${problem}`, options);
    this.toolName = toolName;
  }
}

/**
 * A file tool was asked for a path whose real location (lexically, through a symlink or a chain
 * of them, existing or not) is outside its root.
 *
 * @example
 * ```ts
 * await readFileTool({ root }).execute({ path: '../etc/passwd' }, ctx); // rejects with PathOutsideRootError
 * ```
 */
export class PathOutsideRootError extends LoopchartError {
  readonly path: string;
  constructor(path: string) {
    super('PathOutsideRoot', `path "${path}" is outside the allowed root directory`);
    this.path = path;
  }
}

/** The calculator could not read or evaluate an expression; `position` is the 0-based column. */
export class ExpressionError extends LoopchartError {
  readonly position: number | undefined;
  constructor(message: string, position?: number) {
    super('InvalidExpression', position === undefined ? message : `${message} at position ${position}`);
    this.position = position;
  }
}

/**
 * A file tool hit a file-system problem (missing file, directory where a file was expected...). The
 * message names the path as the model gave it, never the absolute path on the host; the fs
 * error that caused it is kept as `cause` for the host's own logs.
 *
 * @example
 * ```ts
 * await readFileTool({ root }).execute({ path: 'loop' }, ctx);
 * // rejects with FileToolError "loop: too many levels of symbolic links"
 * ```
 */
export class FileToolError extends LoopchartError {
  readonly path: string;
  constructor(path: string, problem: string, options?: { cause?: unknown }) {
    super('FileTool', `${path}: ${problem}`, options);
    this.path = path;
  }
}
