import { parseModelReply, type Model } from '../../model.js';
import { withRetry, type RetryAttempt } from '../../models/retry.js';
import type { Message } from '../../schemas.js';
import { uniqueCallIds } from './call-ids.js';
import { conversationView } from './conversation-view.js';
import { requestContext, type Handler, type IoDeps, type IoScope, type PreparedRequest, type RequestPreparer } from '../protocol/io-protocol.js';

/** The agent's models, each wrapped in retries once for the agent's life. */
export interface RetryingModels {
  /** The model at `index` in fallback order (the first when there is none there). */
  at(index: number): Model;
  /** Where the retries of the calls from now on are reported (undefined: nowhere but the agent's own `onRetry`). */
  reportTo(report: ((attempt: RetryAttempt) => void) | undefined): void;
}

/** One retrying model per agent model for the IO actor's life; each call says where its retries are reported. */
export function retryingModels(deps: IoDeps): RetryingModels {
  let reportRetry: ((attempt: RetryAttempt) => void) | undefined;
  const models: readonly Model[] = deps.models.map((model) =>
    deps.retry === false
      ? model
      : withRetry(model, {
          ...deps.retry,
          onRetry: (attempt) => {
            reportRetry?.(attempt);
            if (deps.retry !== false) deps.retry.onRetry?.(attempt);
          },
        }),
  );
  return {
    at: (index) => models[index] ?? models[0]!,
    reportTo: (report) => {
      reportRetry = report;
    },
  };
}

/** A request with nothing added: the instructions, then the conversation. */
const asItIs: RequestPreparer = (instructions, tools, ctx) => ({ messages: [...(instructions ? [instructions] : []), ...ctx.messages], tools: [...tools] });

/**
 * The `model` request: one model call, its request prepared (instructions, the operations'
 * prompt parts and rewrites), its text deltas and retries reported as they come.
 */
export function modelHandler({ deps, start, execute, send, finish, fail, view }: IoScope, models: RetryingModels): Handler<'model'> {
  // The conversation as a request's messages: the instructions first.
  const requestView = conversationView(deps.instructions);
  return (request) =>
    start(request.key, async (controller) => {
      const { key, turn, speaker } = request;
      const signal = controller.signal;
      try {
        // Let, and dropped once the call returns: the closures below share this frame's scope, and
        // V8 kept that scope (and so this copy of the whole conversation) past the turn, promoting
        // every turn's copy to the old generation: 141 vs 66 MB peak heap in a 5,000-turn run.
        let request_: PreparedRequest | undefined =
          speaker || deps.prepareRequest
            ? (deps.prepareRequest ?? asItIs)(speaker ? speaker.instructions : deps.instructions, request.tools, requestContext(request, () => (speaker ? speaker.present(view(request.conversation)) : view(request.conversation))), request.slices)
            : { messages: requestView(request.conversation) as Message[], tools: request.tools as PreparedRequest['tools'] };
        let index = 0;
        models.reportTo((attempt) => {
          index = 0;
          send(controller, { type: 'io.retry', key, turn, ...attempt });
        });
        const model = models.at(request.model);
        const raw = await execute({ key, kind: 'model', input: { turn, request: request_, model: deps.models[request.model]?.name ?? model.name }, signal }, () =>
          model.generate({
            // Field by field, not `...request_`: a literal that starts with a spread gets a V8 map of
            // its own per call when keys follow it (a map and its descriptors in the old generation).
            messages: request_!.messages,
            tools: request_!.tools,
            ...(deps.responseFormat && { responseFormat: deps.responseFormat }),
            signal,
            idempotencyKey: key,
            // A method, not an arrow: under `keepNames` (tsup, tsx) a named arrow made per call is renamed
            // per call, which turns the function into a dictionary-mode object of its own.
            onTextDelta(delta) {
              send(controller, { type: 'io.textDelta', key, turn, delta, index: index++ });
            },
          }),
        );
        request_ = undefined;
        const reply = uniqueCallIds(parseModelReply(raw));
        finish(controller, key, { type: 'io.replied', key, reply });
      } catch (error) {
        fail(controller, key, 'model', error);
      }
    });
}
