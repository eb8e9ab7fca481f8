// examples/readme/chat-approvals.ts
import type { UIMessage } from 'ai';

/**
 * useChat's `sendAutomaticallyWhen` for pages with subagents: send once every approval request of
 * the last step is answered. (`lastAssistantMessageIsCompleteWithApprovalResponses` also waits
 * for every call of the step to end, and the call running a subagent has not.)
 */
export function approvalsAnswered({ messages }: { messages: UIMessage[] }): boolean {
  const last = messages.at(-1);
  if (last?.role !== 'assistant') return false;
  const step = last.parts.slice(last.parts.map((part) => part.type).lastIndexOf('step-start') + 1);
  const states = step.flatMap((part) => (part.type.startsWith('tool-') && 'state' in part ? [part.state] : []));
  return states.includes('approval-responded') && !states.includes('approval-requested');
}

// The call `c1` runs a subagent (its progress is a preliminary output); the subagent's call `c1/p1` was just approved.
const message = {
  id: 'run-1',
  role: 'assistant',
  parts: [
    { type: 'step-start' },
    { type: 'tool-research', toolCallId: 'c1', state: 'output-available', input: { task: 'send 5' }, output: { subagent: true, text: 'Checking.' }, preliminary: true },
    { type: 'tool-transfer', toolCallId: 'c1/p1', state: 'approval-responded', input: { amount: 5 }, approval: { id: '1:ab…:c1/p1', approved: true } },
  ],
} as UIMessage;
console.log(approvalsAnswered({ messages: [message] })); // true
