import type { ToolCall } from '../../schemas.js';
import { parseToolArguments } from '../../tools/own-arguments.js';
import { checkedVerdict, decideCall, earlierCallsOf, type ToolPolicyPlan, type ToolPolicyVerdict } from './tool-policy.js';
import type { Handler, IoScope, PolicyVerdicts, RequestOf } from '../protocol/io-protocol.js';
import { innerKey } from '../protocol/keys.js';

/**
 * The `approvals` request: which calls of a batch wait for a person. The tool policy is asked
 * first; then each of the agent's own tools' approval rule, a rule that is a function as a side
 * effect of its own.
 */
export function approvalsHandler(io: IoScope): Handler<'approvals'> {
  const { deps, start, execute, finish, fail } = io;
  return (request) =>
    start(request.key, async (controller) => {
      const { key, turn, sessionId } = request;
      try {
        const waiting: string[] = [];
        const policy: PolicyVerdicts = [];
        for (const call of request.calls) {
          // The tool policy first: a denial or a needs-approval ends the call's check.
          const verdict = deps.toolPolicy && (await policyVerdict(io, deps.toolPolicy, request, call, controller.signal));
          if (verdict) policy.push({ toolCallId: call.id, verdict });
          if (verdict?.type === 'needs-approval') waiting.push(call.id);
          if (verdict && verdict.type !== 'allow') continue;
          // Only the agent's own tools may need approval (a source's may not, see `listSources`).
          const tool = deps.tools.get(call.name);
          const rule = tool?.needsApproval;
          if (!tool || rule === undefined || rule === false) continue;
          if (rule === true) {
            waiting.push(call.id);
            continue;
          }
          // Arguments the tool would reject never run, so they need no approval: the runner reports them.
          const args = parseToolArguments(tool, call.args);
          if (!args.success) continue;
          const asks = await execute(
            { key: innerKey(key, { kind: 'approval', call: call.id }), kind: 'approval', input: { turn, call }, signal: controller.signal },
            async () => Boolean(await rule(args.data, { toolCallId: call.id, sessionId })),
          );
          if (asks) waiting.push(call.id);
        }
        finish(controller, key, { type: 'io.approvalsChecked', key, waiting, policy });
      } catch (error) {
        fail(controller, key, 'approval', error);
      }
    });
}

/** One call's policy decision, as a side effect: a durable executor records it, a restore replays it. */
async function policyVerdict(
  { execute, view }: IoScope,
  plan: ToolPolicyPlan,
  request: RequestOf<'approvals'>,
  call: ToolCall,
  signal: AbortSignal,
): Promise<ToolPolicyVerdict> {
  const key = innerKey(request.key, { kind: 'policy', call: call.id });
  const { turn, sessionId, conversation } = request;
  const output = await execute({ key, kind: 'policy', input: { turn, call }, signal }, () =>
    decideCall(plan, { call, sessionId, turn, messages: view(conversation), earlierCalls: earlierCallsOf(conversation.pendingView(), call.id) }, signal),
  );
  return checkedVerdict(key, output);
}
