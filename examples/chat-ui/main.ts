/**
 * The chat page of `npm run example:chat`, written as an app would write it: `useChat` from
 * `@ai-sdk/react` (3, with AI SDK 6) and the transport from `ai`, against loopchart's chat handler
 * on /api/chat. What it shows:
 *
 * - message bubbles, the reply's text with a cursor while it streams;
 * - each tool call as a card with its arguments and result; a call waiting for a person with
 *   Approve / Deny;
 * - a subagent (an agent tool's child run) under the call that runs it: its words so far (the
 *   call's preliminary output) and its own calls as cards nested inside, its approvals answered
 *   like any other (ids `c1/p1`);
 * - Stop, which cancels the run on the server; the stopped reply is not kept (the session stores
 *   none of it), so the page then shows the stored chat, as a reload does;
 * - an error banner; after a dropped connection (a server restart) it reloads the stored chat and
 *   reattaches to the run in flight.
 */
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport, type UIMessage } from 'ai';
import { createElement as h, useEffect, useRef, useState } from 'react';
import { createRoot } from 'react-dom/client';

const chatId = new URL(location.href).searchParams.get('chat') ?? 'example';
const api = '/api/chat';
const chatPath = `${api}/${encodeURIComponent(chatId)}`;

async function storedMessages(): Promise<UIMessage[]> {
  const response = await fetch(`${chatPath}/messages`);
  if (response.status === 404) return [];
  if (!response.ok) throw new Error(`messages: ${response.status}`);
  return ((await response.json()) as { messages: UIMessage[] }).messages;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The stored chat once the server answers again (a restart takes a few seconds), or null after ~30 s. */
async function storedMessagesWhenBack(): Promise<UIMessage[] | null> {
  for (let attempt = 0; attempt < 60; attempt++) {
    try {
      return await storedMessages();
    } catch {
      await sleep(500);
    }
  }
  return null;
}

/** A tool part as this page reads it (`tool-<name>`). */
interface ToolPart {
  type: string;
  toolCallId: string;
  state: string;
  input?: unknown;
  output?: unknown;
  errorText?: string;
  preliminary?: boolean;
  approval?: { id: string; approved?: boolean };
}

const isTool = (part: UIMessage['parts'][number]): boolean => part.type.startsWith('tool-');

/**
 * When useChat sends the answers by itself: every approval request of the last step answered.
 * (The AI SDK's `lastAssistantMessageIsCompleteWithApprovalResponses` also waits for every call
 * of the step to end, which a call running a subagent has not.)
 */
function approvalsAnswered({ messages }: { messages: UIMessage[] }): boolean {
  const last = messages.at(-1);
  if (last?.role !== 'assistant') return false;
  const step = last.parts.slice(last.parts.map((part) => part.type).lastIndexOf('step-start') + 1);
  const tools = step.filter(isTool) as unknown as ToolPart[];
  return tools.some((part) => part.state === 'approval-responded') && !tools.some((part) => part.state === 'approval-requested');
}

const STATE_LABELS: Record<string, string> = {
  'input-streaming': 'preparing',
  'input-available': 'running',
  'approval-requested': 'needs your approval',
  'approval-responded': 'answered',
  'output-available': 'done',
  'output-error': 'failed',
  'output-denied': 'denied',
};

const json = (value: unknown) => (typeof value === 'string' ? value : JSON.stringify(value, null, 2));

type Approve = (id: string, approved: boolean) => void;

/** One call as a card: name, state, arguments, result; Approve / Deny while it waits; a subagent's progress and calls inside. */
function ToolCard({ part, all, approve }: { part: ToolPart; all: ToolPart[]; approve: Approve }): unknown {
  const name = part.type.slice('tool-'.length);
  const progress = part.preliminary && typeof part.output === 'object' && part.output !== null && (part.output as { subagent?: unknown }).subagent === true ? (part.output as { text: string }) : null;
  // The calls of the subagent this call runs: `<this id>/<their id>`, one level down.
  const children = all.filter((other) => other.toolCallId.startsWith(`${part.toolCallId}/`) && !other.toolCallId.slice(part.toolCallId.length + 1).includes('/'));
  const working = part.state === 'input-available' || (part.state === 'output-available' && part.preliminary);
  return h(
    'div',
    { className: `tool${working ? ' working' : ''}`, 'data-tool': name, 'data-state': part.state, 'data-call': part.toolCallId },
    h('div', { className: 'tool-head' }, h('span', { className: 'tool-name' }, name), h('span', { className: `badge ${part.state}` }, progress ? 'agent working' : (STATE_LABELS[part.state] ?? part.state))),
    h('pre', { className: 'tool-input' }, json(part.input ?? {})),
    progress && h('div', { className: 'progress' }, h('span', { className: 'progress-text' }, progress.text), h('span', { className: 'cursor' })),
    children.length > 0 && h('div', { className: 'children' }, children.map((child) => h(ToolCard, { key: child.toolCallId, part: child, all, approve }))),
    part.state === 'approval-requested' &&
      h(
        'div',
        { className: 'approval' },
        h('span', null, `Run ${name} with these arguments?`),
        h('button', { className: 'approve', onClick: () => approve(part.approval!.id, true) }, 'Approve'),
        h('button', { className: 'deny', onClick: () => approve(part.approval!.id, false) }, 'Deny'),
      ),
    part.state === 'output-available' && !part.preliminary && h('pre', { className: 'tool-output' }, json(part.output)),
    part.state === 'output-error' && h('pre', { className: 'tool-output error' }, part.errorText ?? 'failed'),
    part.state === 'output-denied' && h('div', { className: 'tool-output denied' }, 'Denied: the tool did not run.'),
  );
}

function Message({ message, streaming, approve }: { message: UIMessage; streaming: boolean; approve: Approve }): unknown {
  const tools = message.parts.filter(isTool) as unknown as ToolPart[];
  const ids = new Set(tools.map((tool) => tool.toolCallId));
  const lastText = message.parts.map((part) => part.type).lastIndexOf('text');
  return h(
    'div',
    { className: 'message', 'data-role': message.role },
    h('div', { className: 'avatar' }, message.role === 'user' ? 'You' : 'AI'),
    h(
      'div',
      { className: 'bubble' },
      message.parts.map((part, i) => {
        if (part.type === 'text') return h('p', { key: i, className: 'text' }, part.text, streaming && i === lastText && h('span', { className: 'cursor' }));
        if (!isTool(part)) return null;
        const tool = part as unknown as ToolPart;
        // A subagent's call shows inside the card of the call that runs it.
        const at = tool.toolCallId.lastIndexOf('/');
        if (at > 0 && ids.has(tool.toolCallId.slice(0, at))) return null;
        return h(ToolCard, { key: tool.toolCallId, part: tool, all: tools, approve });
      }),
    ),
  );
}

/**
 * One mount of the chat. After a dropped connection `reattach` mounts a fresh one on the stored
 * messages, which resumes: useChat would keep the partial reply it had (its React wrapper drops
 * the transport's replay flag), and the replay would then repeat it.
 */
function Chat({ initial, reattach }: { initial: UIMessage[]; reattach: (stored: UIMessage[]) => void }) {
  const reattaching = useRef(false);
  const [banner, setBanner] = useState<string | null>(null);
  const { messages, sendMessage, status, stop, error, setMessages, addToolApprovalResponse } = useChat({
    id: chatId,
    messages: initial,
    // A chat with stored messages may have a run in flight: reattach to it on load.
    resume: initial.length > 0,
    transport: new DefaultChatTransport({ api }),
    sendAutomaticallyWhen: approvalsAnswered,
    onError: (failure) => {
      setBanner(failure.message);
      // The server may have gone away mid-run: reload the stored chat and reattach (bounded tries).
      if (reattaching.current) return;
      reattaching.current = true;
      void storedMessagesWhenBack().then((stored) => stored && reattach(stored));
    },
  });
  const [input, setInput] = useState('');
  const busy = status === 'submitted' || status === 'streaming';
  // The newest message in view as it grows.
  const list = useRef<HTMLElement | null>(null);
  useEffect(() => {
    if (list.current) list.current.scrollTop = list.current.scrollHeight;
  }, [messages]);
  // useChat's stop() only drops this page's stream (a reload does the same and the run goes on):
  // cancel asks the server. The stopped reply is not stored, so the page then shows what is.
  const cancel = async () => {
    const response = await fetch(`${chatPath}/cancel`, { method: 'POST' }).catch(() => null);
    await stop();
    if (response && !response.ok && response.status !== 409) setBanner(`Stop failed: ${response.status}`);
    const stored = await storedMessages().catch(() => null);
    if (stored) setMessages(stored);
  };
  const approve: Approve = (id, approved) => void addToolApprovalResponse({ id, approved });
  const shownError = banner ?? error?.message ?? null;
  return h(
    'div',
    { className: 'app' },
    h('header', null, h('h1', null, 'loopchart chat'), h('span', { className: 'chat-id' }, chatId), h('span', { id: 'status', className: `status ${status}` }, status)),
    shownError && h('div', { id: 'error', className: 'banner', role: 'alert' }, h('span', null, shownError), h('button', { className: 'dismiss', onClick: () => setBanner(null) }, 'Dismiss')),
    h(
      'main',
      { id: 'messages', ref: list },
      messages.length === 0 && h('p', { className: 'hint' }, 'Try "What is 6 times 7?", "Send 5 to Alice." (asks for approval), "Ask the assistant to send 7 to Bob." (a subagent asks) or "Tell me a story." (long: try Stop, or a reload).'),
      messages.map((message, i) => h(Message, { key: message.id, message, streaming: busy && i === messages.length - 1 && message.role === 'assistant', approve })),
    ),
    h(
      'form',
      {
        className: 'composer',
        onSubmit: (event: Event) => {
          event.preventDefault();
          if (input.trim() === '' || busy) return;
          setBanner(null);
          void sendMessage({ text: input });
          setInput('');
        },
      },
      h('input', { id: 'prompt', value: input, placeholder: 'Message the agent', autoComplete: 'off', onChange: (event: { target: HTMLInputElement }) => setInput(event.target.value) }),
      busy ? h('button', { id: 'stop', type: 'button', onClick: () => void cancel() }, 'Stop') : h('button', { id: 'send', type: 'submit', disabled: input.trim() === '' }, 'Send'),
    ),
  );
}

function App({ first }: { first: UIMessage[] }) {
  const [mount, setMount] = useState({ generation: 0, initial: first });
  const reattach = (stored: UIMessage[]) => setMount((m) => ({ generation: m.generation + 1, initial: stored }));
  return h(Chat, { key: mount.generation, initial: mount.initial, reattach });
}

void storedMessages().then((first) => createRoot(document.getElementById('root')!).render(h(App, { first })));
