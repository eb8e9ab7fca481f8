import type { StateName } from './schemas.js';

/**
 * Every `code` a loopchart error can carry: one list, so a `switch (error.code)` can be
 * exhaustive and a new error class cannot invent a code without adding it here.
 */
export const ERROR_CODES = [
  // The brain (LoopMachine and the agent actor's feeds).
  'IllegalFeed',
  'InvalidFeed',
  'InvalidSnapshot',
  // Configuration of an agent, a tool, a script.
  'InvalidConfig',
  'InvalidTool',
  'DuplicateTool',
  // A tool a restored run recorded, whose source this process cannot find (or tell apart): its calls are refused.
  'UnresolvedTool',
  'InvalidScript',
  // Operations: a hook that failed, a stored slice its schema refuses.
  'OperationFailed',
  'InvalidOperationState',
  'StepTimeout',
  // A tool policy that threw, timed out or returned no verdict.
  'ToolPolicyFailed',
  // A guardrail that tripped, or one that threw, timed out or returned no verdict.
  'GuardrailTripped',
  'GuardrailFailed',
  // A model call (every ModelError subclass: malformed stream, read timeout, deadline, bad reply).
  'ModelError',
  // A model object the AI SDK adapter cannot drive (an unknown specification version).
  'UnsupportedModel',
  // Telemetry is on and @opentelemetry/api cannot be loaded.
  'TelemetryUnavailable',
  // Builtin tools.
  'PathOutsideRoot',
  'FileTool',
  'InvalidExpression',
  // MCP servers (loopchart/mcp).
  'McpServerStart',
  'McpServer',
  'McpTool',
  'McpResultTooLarge',
  // Stores and durable sessions.
  'SessionBusy',
  'SessionNotFound',
  'SessionNotIdle',
  // A DurableSession asked to act (send, decide, rewind, wait for idle) after its close().
  'SessionClosed',
  'SessionScope',
  // A decision that does not bind to the call waiting (issue 26).
  'ApprovalRefused',
  // A tool call started before a restart with no recorded result: the run asks (inDoubt: 'ask').
  'ToolInDoubt',
  'SessionRow',
  'CorruptSession',
  'InvalidWrite',
  'StoreBusy',
  'StoreSchemaVersion',
  'SqliteDriverUnavailable',
  // An optional peer package a feature needs is not installed (pg for a postgres:// store).
  'PackageMissing',
  'InvalidSessionId',
  // The storage under a store (StoreError and its subclasses).
  'StoreFailed',
  'StoreCorrupt',
  'StoreFull',
  'StoreUnavailable',
  'StoreClosed',
  // Replay, fork and the viewer.
  'ReplayUnavailable',
  'InvalidFork',
  'ViewerListen',
  'InvalidViewerOptions',
  // A chart's layout past its time budget (the viewer then draws it another way).
  'LayoutBudget',
  // loopchart/http: a chat handler made with options out of range.
  'InvalidChatHandlerOptions',
  // loopchart/mcp-server: a server made with options it cannot serve (a duplicate tool name, a limit out of range).
  'InvalidMcpServerOptions',
  // loopchart/schedules: a schedule that cannot fire (a cron expression that does not parse, an unknown
  // time zone, an agent the scheduler was not given), one that does not exist, scheduler options out of range.
  'InvalidSchedule',
  'InvalidCron',
  'UnknownTimeZone',
  'ScheduleNotFound',
  'UnknownScheduleAgent',
  'InvalidSchedulerOptions',
  // A child run an agent tool started did not complete, or answered a shape its tool refuses.
  'SubagentFailed',
  // A child run would start deeper in the tree of agents than its agent tool's maxDepth allows.
  'SubagentDepth',
  // runAgent / streamAgent: a Failed run whose cause was not a loopchart error itself.
  'RunFailed',
  // An agent with an output schema whose model never gave an answer that validates.
  'StructuredOutput',
  // loopchart/evals: a dataset file, a case that could not run, a scorer that failed.
  'InvalidDataset',
  // A results-file line an evaluation does not read back (its case runs again).
  'InvalidResultsFile',
  'EvalCaseFailed',
  'ScorerFailed',
  // loopchart/memory: a scope that is no key, an update past the bound, an embed that failed.
  'InvalidScope',
  'MemoryTooLarge',
  'MemoryEmbed',
] as const;

/** The union of every loopchart error `code`. */
export type LoopchartErrorCode = (typeof ERROR_CODES)[number];

/**
 * Marks every loopchart error. A registered symbol (`Symbol.for`) is the same in every copy of
 * the package in a process, ESM and CommonJS builds alike, where `instanceof` is not.
 */
const MARKER = Symbol.for('loopchart.error');

/**
 * Base class of every error loopchart throws on purpose; `code` is stable for `switch`es.
 *
 * @example
 * ```ts
 * try {
 *   new LoopMachine().commitPending(); // nothing is pending: an IllegalFeed
 * } catch (error) {
 *   if (LoopchartError.isInstance(error) && error.code === 'IllegalFeed') console.error(error.message);
 *   else throw error;
 * }
 * ```
 */
export class LoopchartError extends Error {
  readonly code: LoopchartErrorCode;
  /** The names of this error's classes, own first: what `isInstance` compares. */
  declare readonly [MARKER]: readonly string[];
  constructor(code: LoopchartErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    const classes: string[] = [];
    for (let c: unknown = new.target; typeof c === 'function' && c !== Error; c = Object.getPrototypeOf(c)) classes.push(c.name);
    Object.defineProperty(this, MARKER, { value: Object.freeze(classes) });
  }

  /**
   * True for an error of this class (or a subclass) thrown by any copy of loopchart (ESM or
   * CommonJS, another install in `node_modules`), where `instanceof` only knows its own copy.
   * Works on every subclass: `SessionBusyError.isInstance(error)`.
   *
   * @example
   * ```ts
   * try {
   *   await session.flush();
   * } catch (error) {
   *   if (SessionBusyError.isInstance(error)) console.error('another process moved the session on: reopen it');
   *   else if (LoopchartError.isInstance(error)) console.error(`${error.code}: ${error.message}`);
   * }
   * ```
   */
  static isInstance<T extends abstract new (...args: never[]) => LoopchartError>(this: T, error: unknown): error is InstanceType<T> {
    if (typeof error !== 'object' || error === null) return false;
    const classes = (error as Record<symbol, unknown>)[MARKER];
    return Array.isArray(classes) && classes.includes(this.name);
  }
}

/** A feed arrived in a state that does not accept it. The machine is unchanged. */
export class IllegalFeedError extends LoopchartError {
  readonly feed: string;
  readonly state: StateName;
  constructor(feed: string, state: StateName, why?: string) {
    super('IllegalFeed', `${feed} is not allowed in state ${state}${why ? `: ${why}` : ''}`);
    this.feed = feed;
    this.state = state;
  }
}

/** A feed arrived in a legal state but its payload breaks the contract. The machine is unchanged. */
export class InvalidFeedError extends LoopchartError {
  readonly feed: string;
  constructor(feed: string, problem: string) {
    super('InvalidFeed', `${feed}: ${problem}`);
    this.feed = feed;
  }
}

/**
 * An agent configuration that contradicts itself or names something that is not there; thrown
 * when the agent is built, before any run starts.
 *
 * @example
 * ```ts
 * import { createAgentMachine, InvalidConfigError } from 'loopchart';
 * import { scriptedModel } from 'loopchart/testing';
 *
 * try {
 *   createAgentMachine({ model: scriptedModel([]), policy: { compactThreshold: 50 }, pruning: { threshold: 60 } });
 * } catch (error) {
 *   if (InvalidConfigError.isInstance(error)) console.error(error.message); // the prune line must be below compactThreshold
 * }
 * ```
 */
export class InvalidConfigError extends LoopchartError {
  constructor(problem: string) {
    super('InvalidConfig', `invalid agent configuration: ${problem}`);
  }
}

/** `restore` was given something that is not a snapshot this version can read. */
export class InvalidSnapshotError extends LoopchartError {
  constructor(problem: string) {
    super('InvalidSnapshot', `cannot restore loop snapshot: ${problem}`);
  }
}

/**
 * A feature needs an optional peer package that is not installed (say `pg` for a `postgres://`
 * store): the message names the package and the command that installs it.
 *
 * @example
 * ```ts
 * try {
 *   await openSessionStore('postgres://localhost/app');
 * } catch (error) {
 *   if (MissingPackageError.isInstance(error)) console.error(error.message); // ... npm install pg
 * }
 * ```
 */
export class MissingPackageError extends LoopchartError {
  readonly packageName: string;
  constructor(packageName: string, feature: string, options?: { cause?: unknown }) {
    super('PackageMissing', `${feature} needs the package '${packageName}', which is not installed: npm install ${packageName}`, options);
    this.packageName = packageName;
  }
}

/**
 * The typed error of a `Failed` run whose cause was not a loopchart error itself: a custom model
 * or tool that threw a plain `Error`, a compaction that made no progress. `runAgent` and
 * `streamAgent` give it as `result.error` (a `ModelError`, `OperationError`... is given as is);
 * `failure` is the outcome's `{ type, message }`, `cause` what was thrown, when anything was.
 *
 * @example
 * ```ts
 * const result = await runAgent({ model, prompt: 'Hello?' });
 * if (result.error) {
 *   console.error(result.error.message); // one line: what failed and what to check
 *   process.exitCode = 1;
 * }
 * ```
 */
export class RunFailedError extends LoopchartError {
  readonly failure: { type: string; message: string };
  constructor(failure: { type: string; message: string }, options?: { cause?: unknown }) {
    super('RunFailed', `the run failed (${failure.type}): ${failure.message}`, options);
    this.failure = failure;
  }
}


/** One reason an answer does not match the output schema: where (`(root)`, `items[0].price`) and what. */
export interface OutputIssue {
  path: string;
  message: string;
}

/**
 * The model's final answer did not match the agent's `output` schema, and it had no attempts
 * left (`outputRetries` answers were sent back with the validation error): the run ends
 * `Failed` with type `StructuredOutputError`, its message naming the first issue's path.
 * `runAgent` and `streamAgent` give this error as `result.error`.
 *
 * @example
 * ```ts
 * const result = await runAgent({ model, prompt: 'Name a city.', output: z.object({ city: z.string() }) });
 * if (StructuredOutputError.isInstance(result.error)) console.error(result.error.path, result.error.issues);
 * ```
 */
export class StructuredOutputError extends LoopchartError {
  /** The first issue's path: `(root)` for the answer as a whole. */
  readonly path: string;
  readonly issues: readonly OutputIssue[];
  /** Answers the model gave, the last one included. */
  readonly attempts: number;
  constructor(issues: readonly OutputIssue[], attempts: number) {
    const first = issues[0] ?? { path: '(root)', message: 'no answer' };
    const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : '';
    super('StructuredOutput', `the answer does not match the output schema after ${attempts} attempt${attempts === 1 ? '' : 's'}: at ${first.path}: ${first.message}${more}`);
    this.path = first.path;
    this.issues = issues;
    this.attempts = attempts;
  }
}
