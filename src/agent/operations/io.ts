import type { PendingToolCall } from '../../schemas.js';
import { DEFAULT_OPERATION_TIMEOUT_MS, OperationError, type HookContext, type Operation } from './operation.js';
import type { OperationHook } from './operation-state.js';
import { checkOutput, messageOf, type OperationOutput } from './operation-rules.js';
import { contextFor } from './operation-context.js';
import { requestContext, type Handler, type IoScope, type RequestContext, type Slices } from '../protocol/io-protocol.js';
import { innerKey } from '../protocol/keys.js';
import { MAX_TIMER_MS } from '../../timer-bound.js';
import { withSignal } from '../../object-slot.js';

/**
 * The `operation` request: runs the operations of a hook point in list order from `from`, each
 * as its own side effect, reporting each output, until one yields or the list ends.
 */
export const operationHandler =
  ({ deps, start, execute, send, report, finish, fail, view }: IoScope): Handler<'operation'> =>
  (request) =>
    start(request.key, async (controller) => {
      const { key, hook, turn, reply, batch } = request;
      const list = deps.operations.at[hook];
      const ctx = requestContext(request, () => view(request.conversation));
      for (let index = request.from; index < list.length; index++) {
        const op = list[index]!;
        let output: OperationOutput | null;
        try {
          output = await execute(
            { key: innerKey(key, { kind: 'operation', operation: op.name }), kind: 'operation', input: { turn, operation: op.name, hook, pointKey: key }, signal: controller.signal },
            () =>
              runHook(
                op,
                hook,
                controller.signal,
                (own) =>
                  hook === 'beforeModelCall'
                    ? op.beforeModelCall!(hookContext(op, ctx, request.slices, own))
                    : hook === 'afterReply'
                      ? op.afterReply!(reply!, hookContext(op, ctx, request.slices, own))
                      : op.beforeTools!(batch, hookContext(op, ctx, request.slices, own)),
                batch,
              ),
          );
        } catch (error) {
          if (controller.signal.aborted) return report({ type: 'io.failed', key, kind: 'operation', error });
          // Whatever failed on the way (the hook, an executor around it) fails the run naming the operation.
          const named = OperationError.isInstance(error) ? error : new OperationError(op.name, hook, `failed: ${messageOf(error)}`, { cause: error });
          return fail(controller, key, 'operation', named);
        }
        // Cancelled while it ran: what it returned is still reported (a cancelling run keeps its state).
        if (controller.signal.aborted) return report({ type: 'io.operated', key, index, output });
        const last = index === list.length - 1 || output?.yield !== undefined;
        if (last) return finish(controller, key, { type: 'io.operated', key, index, output });
        send(controller, { type: 'io.operated', key, index, output });
      }
    });

/**
 * Runs one hook with its own signal (the run's, or its timeout) and checks what it returned. A
 * hook that returns at once is not timed; one that returns a promise races its timeout. Throws
 * `OperationError` naming the operation.
 */
async function runHook(
  op: Operation,
  hook: OperationHook,
  run: AbortSignal,
  call: (own: AbortController) => unknown,
  batch: readonly PendingToolCall[],
): Promise<OperationOutput | null> {
  const controller = new AbortController();
  // A listener object with a method, not a named arrow: under `keepNames` (tsup, tsx) a named
  // closure made per call is renamed per call, which gives it a dictionary of its own in V8.
  const onAbort = {
    handleEvent() {
      controller.abort(run.reason);
    },
  };
  run.addEventListener('abort', onAbort, { once: true });
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    let value = call(controller);
    if (value && typeof (value as { then?: unknown }).then === 'function') {
      const ms = op.timeoutMs ?? DEFAULT_OPERATION_TIMEOUT_MS;
      const timeout = new Promise<never>((_, reject) => {
        // Past setTimeout's bound a timeout is none (a longer delay would fire at once).
        if (!Number.isFinite(ms) || ms > MAX_TIMER_MS) return;
        timer = setTimeout(() => {
          const error = new OperationError(op.name, hook, `timed out after ${ms} ms`);
          controller.abort(error);
          reject(error);
        }, ms);
      });
      value = await Promise.race([value, timeout]);
    }
    return checkOutput(op, hook, value as never, batch);
  } catch (error) {
    if (OperationError.isInstance(error)) throw error;
    throw new OperationError(op.name, hook, `threw: ${messageOf(error)}`, { cause: error });
  } finally {
    clearTimeout(timer);
    run.removeEventListener('abort', onAbort);
  }
}

/** What one hook is given: its operation's context and its own signal. */
const hookContext = (op: Operation, ctx: RequestContext, slices: Slices, own: AbortController): HookContext =>
  withSignal(contextFor(op, ctx, slices), own);
