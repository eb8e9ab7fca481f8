import { estimateToolTokens } from '../../tokens.js';
import { changedNothing } from '../../compaction/contract.js';
import { calibrated, requestTokens } from './request-size.js';
import type { RetryingModels } from './io-model.js';
import type { Handler, IoScope } from '../protocol/io-protocol.js';

/**
 * The `compaction` request: the agent's compactor (none: nothing changes) as one side effect,
 * the result measured as the whole next request.
 */
export const compactionHandler =
  ({ deps, start, execute, finish, fail, view }: IoScope, models: RetryingModels): Handler<'compaction'> =>
  (request) =>
    start(request.key, async (controller) => {
      const { key, turn, reason, tokensBefore, systemTokens, contextWindow } = request;
      const signal = controller.signal;
      try {
        const messages = view(request.conversation);
        const definitions = request.tools;
        const output = await execute({ key, kind: 'compaction', input: { turn, reason, messages, tokensBefore }, signal }, async () => {
          models.reportTo(undefined); // a summary call's retries are not the turn's
          const result = deps.compactor
            ? await deps.compactor({
                messages,
                reason,
                tokensBefore,
                contextWindow,
                tools: definitions,
                idempotencyKey: key,
                model: models.at(request.model),
                signal,
              })
            : null;
          if (!result) return { before: tokensBefore, after: tokensBefore };
          // The same measure as the `before` side: the whole next request (system parts and
          // tool definitions included); the compactor's own count may raise it, never lower it.
          const measured = requestTokens({ system: systemTokens, messages: result.messages, tools: definitions });
          const after = calibrated(measured, result.tokensAfter + estimateToolTokens(definitions) + systemTokens);
          return { before: tokensBefore, after, messages: result.messages };
        });
        finish(controller, key, { type: 'io.compacted', key, reason, output });
      } catch (error) {
        // A compactor that failed without touching the conversation changed nothing: the brain's
        // stall rule decides (a threshold pass that still fits defers, otherwise CompactionStalled).
        if (!changedNothing(error)) return fail(controller, key, 'compaction', error);
        finish(controller, key, { type: 'io.compacted', key, reason, output: { before: tokensBefore, after: tokensBefore } });
      }
    });
