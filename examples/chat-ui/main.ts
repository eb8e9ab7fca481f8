/**
 * The chat page of `npm run example:chat`: `useChat` (@ai-sdk/react 3, AI SDK 6) against
 * loopchart's chat handler on /api/chat. It loads the stored chat and reattaches to a run in
 * flight, renders text and tool parts, answers approvals with Approve / Deny buttons, and its Stop
 * button drops the stream and cancels the run on the server.
 */
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses, type UIMessage } from 'ai-v6';
import { createElement as h, useState } from 'react';
import { createRoot } from 'react-dom/client';

const chatId = new URL(location.href).searchParams.get('chat') ?? 'example';
const api = '/api/chat';

async function storedMessages(): Promise<UIMessage[]> {
  const response = await fetch(`${api}/${encodeURIComponent(chatId)}/messages`);
  if (response.status === 404) return [];
  if (!response.ok) throw new Error(`messages: ${response.status}`);
  return ((await response.json()) as { messages: UIMessage[] }).messages;
}

type Approve = (id: string, approved: boolean) => void;

function Part({ part, approve }: { part: UIMessage['parts'][number]; approve: Approve }) {
  if (part.type === 'text') return h('span', { className: 'text' }, part.text);
  if (!part.type.startsWith('tool-')) return null;
  const tool = part as unknown as { type: string; state: string; input?: unknown; output?: unknown; approval?: { id: string } };
  const name = tool.type.slice('tool-'.length);
  return h(
    'div',
    { className: 'tool', 'data-state': tool.state },
    `${name} ${JSON.stringify(tool.input ?? null)} ${tool.state}${tool.output !== undefined ? ` -> ${String(tool.output)}` : ''}`,
    tool.state === 'approval-requested' &&
      h('span', null, h('button', { onClick: () => approve(tool.approval!.id, true) }, 'Approve'), h('button', { onClick: () => approve(tool.approval!.id, false) }, 'Deny')),
  );
}

function Chat({ initial }: { initial: UIMessage[] }) {
  const { messages, sendMessage, status, stop, addToolApprovalResponse } = useChat({
    id: chatId,
    messages: initial,
    resume: initial.length > 0,
    transport: new DefaultChatTransport({ api }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  const [input, setInput] = useState('');
  // stop() only drops this page's stream (a reload does the same and the run goes on): cancel asks the server.
  const cancel = () => {
    void stop();
    void fetch(`${api}/${encodeURIComponent(chatId)}/cancel`, { method: 'POST' });
  };
  const approve: Approve = (id, approved) => void addToolApprovalResponse({ id, approved });
  const busy = status === 'submitted' || status === 'streaming';
  return h(
    'div',
    null,
    h('p', null, 'Try "Send 5 to Alice." (asks for approval) or "Tell me a story." (long: try Stop).'),
    h('div', { id: 'messages' }, messages.map((message) => h('div', { key: message.id, 'data-role': message.role }, h('b', null, `${message.role}: `), message.parts.map((part, i) => h(Part, { key: i, part, approve }))))),
    h(
      'form',
      {
        onSubmit: (event: Event) => {
          event.preventDefault();
          if (input.trim() === '' || busy) return;
          void sendMessage({ text: input });
          setInput('');
        },
      },
      h('input', { value: input, placeholder: 'Ask something', onChange: (event: { target: HTMLInputElement }) => setInput(event.target.value) }),
      h('button', { type: 'submit', disabled: busy }, 'Send'),
      h('button', { type: 'button', disabled: !busy, onClick: cancel }, 'Stop'),
      h('span', null, ` ${status}`),
    ),
  );
}

void storedMessages().then((initial) => createRoot(document.getElementById('root')!).render(h(Chat, { initial })));
