import type { OperationHook } from '../operations/operation-state.js';

/**
 * Side-effect keys as data. Every key of a session is built here from its parts, and parsed
 * back here; everyone else carries the parts next to the key and reads those. The strings are a
 * stored protocol (session rows, tool journals, Restate journals hold them), so their shape
 * never changes:
 *
 * - `<session>:run-<r>:toolset`, `<session>:run-<r>:guard-input[:<guardrail>]`
 * - `<session>:run-<r>:turn-<t>:model | tools | compaction`
 * - points: `<model>:before` (beforeModelCall), `<model>:after` (afterReply), `<tools>:before`
 *   (beforeTools); an operation at a point: `<point>:<operation>`
 * - the output check: `<model>:guard[:<guardrail>]`
 * - a batch's approval check: `<tools>:approvals`, and per call `<tools>:approvals:<call>:policy | approval`
 * - a tool call: `<tools>:<call>`, rerun n: `<tools>:<call>:rerun-<n>`; its start marker
 *   `<tools>:<call>:started` (rerun n: `:started-<n>`), all of a batch's under `<tools>:started`
 */

/** A run of a session. */
export interface RunRef {
  readonly session: string;
  readonly run: number;
}

/** A turn of a run: its model call (turn t is the t-th call) and the tool batch of its reply. */
export interface TurnRef extends RunRef {
  readonly turn: number;
}

/** The steps a turn has one of. */
export type StepKind = 'model' | 'tools' | 'compaction';

/** Where in a session one key sits. `kind` names what the key is of (a side effect, or a step grouping some). */
export type KeyParts =
  | (RunRef & { readonly kind: 'toolset' })
  | (RunRef & { readonly kind: 'guardCheck'; readonly stage: 'input' })
  | (TurnRef & { readonly kind: 'guardCheck'; readonly stage: 'output' })
  | (RunRef & { readonly kind: 'guardrail'; readonly stage: 'input'; readonly guardrail: string })
  | (TurnRef & { readonly kind: 'guardrail'; readonly stage: 'output'; readonly guardrail: string })
  | (TurnRef & { readonly kind: StepKind })
  | (TurnRef & { readonly kind: 'point'; readonly hook: OperationHook })
  | (TurnRef & { readonly kind: 'operation'; readonly hook: OperationHook; readonly operation: string })
  | (TurnRef & { readonly kind: 'approvals' })
  | (TurnRef & { readonly kind: 'policy' | 'approval'; readonly call: string })
  /** `rerun`: 0 for the call's first run; a call in doubt run again has keys of its own. */
  | (TurnRef & { readonly kind: 'tool' | 'toolStart'; readonly call: string; readonly rerun: number })
  /** The journal batch of a tool batch's start markers. */
  | (TurnRef & { readonly kind: 'toolStarts' });

export type KeyKind = KeyParts['kind'];
/** The parts of keys of one kind. */
export type PartsOf<K extends KeyKind> = Extract<KeyParts, { kind: K }>;

/** The prefix every key of a run starts with. */
export const runKeyOf = ({ session, run }: RunRef): string => `${session}:run-${run}:`;

const turnKey = (parts: TurnRef, step: StepKind): string => `${runKeyOf(parts)}turn-${parts.turn}:${step}`;
const pointKey = (parts: TurnRef, hook: OperationHook): string =>
  hook === 'beforeModelCall' ? `${turnKey(parts, 'model')}:before` : hook === 'afterReply' ? `${turnKey(parts, 'model')}:after` : `${turnKey(parts, 'tools')}:before`;
const checkKey = (parts: PartsOf<'guardCheck' | 'guardrail'>): string =>
  parts.stage === 'input' ? `${runKeyOf(parts)}guard-input` : `${turnKey(parts, 'model')}:guard`;

/** The key of the parts. */
export function keyOf(parts: KeyParts): string {
  switch (parts.kind) {
    case 'toolset':
      return `${runKeyOf(parts)}toolset`;
    case 'guardCheck':
      return checkKey(parts);
    case 'guardrail':
      return innerKey(checkKey(parts), parts);
    case 'model':
    case 'tools':
    case 'compaction':
      return turnKey(parts, parts.kind);
    case 'point':
      return pointKey(parts, parts.hook);
    case 'operation':
      return innerKey(pointKey(parts, parts.hook), parts);
    case 'approvals':
      return `${turnKey(parts, 'tools')}:approvals`;
    case 'policy':
    case 'approval':
      return innerKey(keyOf({ ...turnOf(parts), kind: 'approvals' }), parts);
    case 'tool':
    case 'toolStart':
    case 'toolStarts':
      return innerKey(turnKey(parts, 'tools'), parts);
  }
}

/**
 * What runs inside a step, relative to the step: a guardrail of a check, an operation at a
 * point, a call's policy or approval check within the batch's approvals step, a call of a
 * tool batch and its start marker, the batch's markers.
 */
export type InnerParts =
  | { readonly kind: 'guardrail'; readonly guardrail: string }
  | { readonly kind: 'operation'; readonly operation: string }
  | { readonly kind: 'policy' | 'approval'; readonly call: string }
  | { readonly kind: 'tool' | 'toolStart'; readonly call: string; readonly rerun: number }
  | { readonly kind: 'toolStarts' };

/**
 * The key of a side effect inside the step whose key the IO was handed with its request: the
 * same string `keyOf` makes from the whole parts (a test holds the two together).
 */
export function innerKey(stepKey: string, inner: InnerParts): string {
  switch (inner.kind) {
    case 'guardrail':
      return `${stepKey}:${inner.guardrail}`;
    case 'operation':
      return `${stepKey}:${inner.operation}`;
    case 'policy':
    case 'approval':
      return `${stepKey}:${inner.call}:${inner.kind}`;
    case 'tool':
      return `${stepKey}:${inner.call}${inner.rerun === 0 ? '' : `:rerun-${inner.rerun}`}`;
    case 'toolStart':
      return `${stepKey}:${inner.call}:started${inner.rerun === 0 ? '' : `-${inner.rerun}`}`;
    case 'toolStarts':
      return `${stepKey}:started`;
  }
}

/** The run and turn of parts, alone: what another key of the same turn is built from. */
export const turnOf = ({ session, run, turn }: TurnRef): TurnRef => ({ session, run, turn });

/** Turn `turn` of the current run of a context of the driver's. */
export const turnAt = (context: { sessionId: string; runIndex: number }, turn: number): TurnRef => ({ session: context.sessionId, run: context.runIndex, turn });

/** The parts of a turn's step, for a context of the driver's. */
export const stepParts = (context: { sessionId: string; runIndex: number }, turn: number, kind: StepKind): PartsOf<StepKind> => ({
  kind,
  ...turnAt(context, turn),
});

/**
 * The idempotency key of one service call: stable across retries and across a restore that
 * repeats the call, unique within a session (runs are numbered, turns within a run).
 */
export const serviceKey = (context: { sessionId: string; runIndex: number }, turn: number, what: StepKind): string =>
  keyOf(stepParts(context, turn, what));

/**
 * The session id of the child run a tool call starts (an agent tool's): `<session>/run-<r>:turn-<t>:<call>`,
 * unique in the parent and the same in every process that repeats the call.
 */
export const childSessionOf = (call: TurnRef & { call: string }): string => `${call.session}/run-${call.run}:turn-${call.turn}:${call.call}`;

const COUNT = /^(?:0|[1-9]\d*)$/;
const count = (text: string): number | null => (COUNT.test(text) ? Number(text) : null);

/**
 * The parts of a key, or null for a string no builder here makes. Session ids are chosen by
 * users and may hold anything, `:run-1:` included: with `session` given the key is read as that
 * session's; without, the first reading that parses wins. Call ids, operation and guardrail
 * names may hold `:` too; where one looks like a sub-step's word (a call id `before`,
 * `approvals` or `started`, or one ending in `:started`, `:started-<n>` or `:rerun-<n>`) the
 * sub-step reading wins.
 */
export function parseKey(key: string, session?: string): KeyParts | null {
  if (session !== undefined) return key.startsWith(`${session}:`) ? parseRun(session, key.slice(session.length + 1)) : null;
  for (let at = key.indexOf(':run-'); at >= 0; at = key.indexOf(':run-', at + 1)) {
    const parts = parseRun(key.slice(0, at), key.slice(at + 1));
    if (parts) return parts;
  }
  return null;
}

/** `run-<r>:...` of a key. */
function parseRun(session: string, rest: string): KeyParts | null {
  const match = /^run-([^:]+):(.*)$/s.exec(rest);
  const run = match && count(match[1]!);
  if (run === null || !match) return null;
  const tail = match[2]!;
  if (tail === 'toolset') return { kind: 'toolset', session, run };
  if (tail === 'guard-input') return { kind: 'guardCheck', stage: 'input', session, run };
  if (tail.startsWith('guard-input:')) return { kind: 'guardrail', stage: 'input', session, run, guardrail: tail.slice('guard-input:'.length) };
  const turnMatch = /^turn-([^:]+):(.*)$/s.exec(tail);
  const turn = turnMatch && count(turnMatch[1]!);
  if (turn === null || !turnMatch) return null;
  return parseTurn({ session, run, turn }, turnMatch[2]!);
}

/** What follows `turn-<t>:` in a key. */
function parseTurn(at: TurnRef, tail: string): KeyParts | null {
  if (tail === 'model' || tail === 'tools' || tail === 'compaction') return { kind: tail, ...at };
  if (tail === 'model:guard') return { kind: 'guardCheck', stage: 'output', ...at };
  if (tail.startsWith('model:guard:')) return { kind: 'guardrail', stage: 'output', ...at, guardrail: tail.slice('model:guard:'.length) };
  for (const [prefix, hook] of POINTS) {
    if (tail === prefix) return { kind: 'point', hook, ...at };
    if (tail.startsWith(`${prefix}:`)) return { kind: 'operation', hook, ...at, operation: tail.slice(prefix.length + 1) };
  }
  if (!tail.startsWith('tools:')) return null;
  return parseBatch(at, tail.slice('tools:'.length));
}

const POINTS: ReadonlyArray<readonly [string, OperationHook]> = [
  ['model:before', 'beforeModelCall'],
  ['model:after', 'afterReply'],
  ['tools:before', 'beforeTools'],
];

/** What follows `:tools:` in a key: the batch's approval check, its markers, or one call. */
function parseBatch(at: TurnRef, tail: string): KeyParts | null {
  if (tail === 'approvals') return { kind: 'approvals', ...at };
  if (tail === 'started') return { kind: 'toolStarts', ...at };
  const check = /^approvals:(.+):(policy|approval)$/s.exec(tail);
  if (check) return { kind: check[2] as 'policy' | 'approval', ...at, call: check[1]! };
  if (tail === '') return null;
  const start = /^(.+):started(?:-([1-9]\d*))?$/s.exec(tail);
  if (start) return { kind: 'toolStart', ...at, call: start[1]!, rerun: start[2] ? Number(start[2]) : 0 };
  const rerun = /^(.+):rerun-([1-9]\d*)$/s.exec(tail);
  if (rerun) return { kind: 'tool', ...at, call: rerun[1]!, rerun: Number(rerun[2]) };
  return { kind: 'tool', ...at, call: tail, rerun: 0 };
}

/**
 * The keys of one start of an `'ask'` call: its start marker, and the tool step itself. The
 * first run keeps the call's own key; rerun n has keys of its own (a journal that recorded the
 * doubt does not answer it), while the tool always sees the call's key as its idempotency key.
 */
export function startKeys(batchKey: string, call: string, reruns: number): { marker: string; step: string } {
  return { marker: innerKey(batchKey, { kind: 'toolStart', call, rerun: reruns }), step: innerKey(batchKey, { kind: 'tool', call, rerun: reruns }) };
}

/** The journal batch holding a tool batch's start markers. */
export const markerBatch = (batchKey: string): string => innerKey(batchKey, { kind: 'toolStarts' });
