import { checkedGuardVerdict, runGuardrail } from './guardrails.js';
import type { Handler, IoScope } from '../protocol/io-protocol.js';
import { innerKey } from '../protocol/keys.js';

/** The `guardrails` request: runs the named guardrails of one check in parallel, each as its own side effect. */
export const guardrailsHandler =
  ({ deps, start, execute, send, fail, view }: IoScope): Handler<'guardrails'> =>
  (request) =>
    start(request.key, async (controller) => {
      const { key, stage, turn, sessionId, text, output } = request;
      const messages = view(request.conversation);
      const input = { stage, sessionId, text, messages, ...(output !== undefined && { output }) };
      // In parallel; the first failure fails the check (the chart stops listening to the rest).
      await Promise.all(
        request.names.map(async (name) => {
          const guardrail = deps.guardrails!.byName.get(name)!;
          try {
            const output = await execute(
              { key: innerKey(key, { kind: 'guardrail', guardrail: name }), kind: 'guardrail', input: { turn, stage, guardrail: name, checkKey: key }, signal: controller.signal },
              () => runGuardrail(guardrail, input, controller.signal),
            );
            send(controller, { type: 'io.guarded', key, name, verdict: checkedGuardVerdict(name, stage, output) });
          } catch (error) {
            fail(controller, key, 'guardrail', error);
          }
        }),
      );
    });
