import type { Message } from '../../schemas.js';
import { OperationError, type Operation, type OperationContext } from './operation.js';
import { messageOf } from './operation-rules.js';
import { lazyField } from '../../object-slot.js';
import type { PreparedRequest, RequestPreparer, Slices } from '../protocol/io-protocol.js';

/** An operation context's `messages`: the call's, read when the operation first reads them. */
const withMessages = lazyField('messages', (ctx: Omit<OperationContext, 'state'>) => ctx.messages);

/** The context one operation is given: the shared part and its own slice. */
export const contextFor = (op: Operation, ctx: Omit<OperationContext, 'state'>, slices: Slices): OperationContext => {
  const context: { -readonly [K in keyof OperationContext]: OperationContext[K] } = withMessages({ sessionId: ctx.sessionId, scope: ctx.scope, turn: ctx.turn } as OperationContext, ctx);
  context.state = Object.hasOwn(slices, op.name) ? slices[op.name] : op.state?.initial;
  return context;
};

/**
 * The operations' prompt parts for this call: sent before the conversation, never stored. A
 * prompt that throws or returns anything but a string (or nothing) throws `OperationError`
 * naming the operation, for the run to fail with.
 */
export function promptParts(operations: readonly Operation[], ctx: Omit<OperationContext, 'state'>, slices: Slices): Message[] {
  return operations.flatMap((op) => {
    if (!op.prompt) return [];
    let text: unknown;
    try {
      text = op.prompt(contextFor(op, ctx, slices));
    } catch (error) {
      throw new OperationError(op.name, 'prompt', `threw: ${messageOf(error)}`, { cause: error });
    }
    if (text === undefined || text === null || text === '') return [];
    if (typeof text !== 'string') throw new OperationError(op.name, 'prompt', `returned ${describeValue(text)}, not a string`);
    return [{ role: 'system' as const, content: text }];
  });
}

const describeValue = (value: unknown): string => (Array.isArray(value) ? 'an array' : value === null ? 'null' : `a ${typeof value}`);

/** How `operations` prepare each model call's request: instructions and prompt parts first, then their rewrites, in list order. */
export const requestPreparer = (operations: readonly Operation[]): RequestPreparer => (instructions, tools, ctx, slices) => {
  const parts = promptParts(operations, ctx, slices);
  let request: PreparedRequest = {
    messages: [...(instructions ? [instructions] : []), ...parts, ...ctx.messages],
    tools: [...tools],
  };
  for (const op of operations) {
    if (!op.prepareRequest) continue;
    let rewritten: unknown;
    try {
      rewritten = op.prepareRequest(request, contextFor(op, ctx, slices));
    } catch (error) {
      throw new OperationError(op.name, 'prepareRequest', `threw: ${messageOf(error)}`, { cause: error });
    }
    if (rewritten === undefined) continue;
    request = readRewrite(op, rewritten);
  }
  return request;
};

/**
 * A rewritten request read once, inside a try: its two lists copied (a getter or Proxy that
 * throws is the operation's failure, `OperationError`, not the model call's later on).
 */
function readRewrite(op: Operation, rewritten: unknown): PreparedRequest {
  let copy: PreparedRequest | null = null;
  try {
    const shape = rewritten as Partial<PreparedRequest> | null;
    if (shape && typeof shape === 'object' && Array.isArray(shape.messages) && Array.isArray(shape.tools)) {
      copy = { messages: Array.from(shape.messages), tools: Array.from(shape.tools) };
    }
  } catch (error) {
    throw new OperationError(op.name, 'prepareRequest', `returned a request that could not be read: ${messageOf(error)}`, { cause: error });
  }
  if (!copy) throw new OperationError(op.name, 'prepareRequest', `returned ${describeValue(rewritten)} without messages and tools arrays`);
  return copy;
}
