/**
 * The chat page of `npm run example:chat`: `useChat` (@ai-sdk/react 3, AI SDK 6) against
 * loopchart's chat handler on /api/chat. It loads the stored chat and reattaches to a run in
 * flight, renders text and tool parts, answers approvals with Approve / Deny buttons, reattaches
 * after the server went away mid-run (a restart: the session is durable), and its Stop button
 * drops the stream and cancels the run on the server.
 */
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses, type UIMessage } from 'ai-v6';
import { createElement as h, useRef, useState } from 'react';
import { createRoot } from 'react-dom/client';

const chatId = new URL(location.href).searchParams.get('chat') ?? 'example';
const api = '/api/chat';

async function storedMessages(): Promise<UIMessage[]> {
  const response = await fetch(`${api}/${encodeURIComponent(chatId)}/messages`);
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

type Approve = (id: string, approved: boolean) => void;

function Part({ part, approve }: { part: UIMessage['parts'][number]; approve: Approve }) {
  if (part.type === 'text') return h('span', { className: 'text' }, part.text);
  if (!part.type.startsWith('tool-')) return null;
  const tool = part as unknown as { type: string; state: string; input?: unknown; output?: unknown; approval?: { id: string } };
  const name = tool.type.slice('tool-'.length);
  return h(
    'div',
    { className: 'tool', 'data-tool': name, 'data-state': tool.state },
    `${name} ${JSON.stringify(tool.input ?? null)} ${tool.state}${tool.output !== undefined ? ` -> ${String(tool.output)}` : ''}`,
    tool.state === 'approval-requested' &&
      h(
        'span',
        null,
        h('button', { className: 'approve', onClick: () => approve(tool.approval!.id, true) }, 'Approve'),
        h('button', { className: 'deny', onClick: () => approve(tool.approval!.id, false) }, 'Deny'),
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
  const { messages, sendMessage, status, stop, addToolApprovalResponse } = useChat({
    id: chatId,
    messages: initial,
    // A chat with stored messages may have a run in flight: reattach to it on load.
    resume: initial.length > 0,
    transport: new DefaultChatTransport({ api }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    // The server went away mid-run: reload the stored chat and reattach (bounded tries).
    onError: () => {
      if (reattaching.current) return;
      reattaching.current = true;
      void storedMessagesWhenBack().then((stored) => stored && reattach(stored));
    },
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
    h('p', null, 'Try "What is 6 times 7?", "Send 5 to Alice." (asks for approval) or "Tell me a story." (long: try Stop, or a reload).'),
    h(
      'div',
      { id: 'messages' },
      messages.map((message) =>
        h('div', { key: message.id, className: 'message', 'data-role': message.role }, h('b', null, `${message.role}: `), message.parts.map((part, i) => h(Part, { key: i, part, approve }))),
      ),
    ),
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
      h('input', { id: 'prompt', value: input, placeholder: 'Ask something', onChange: (event: { target: HTMLInputElement }) => setInput(event.target.value) }),
      h('button', { id: 'send', type: 'submit', disabled: busy }, 'Send'),
      h('button', { id: 'stop', type: 'button', disabled: !busy, onClick: cancel }, 'Stop'),
      h('span', { id: 'status' }, status),
    ),
  );
}

function App({ first }: { first: UIMessage[] }) {
  const [mount, setMount] = useState({ generation: 0, initial: first });
  const reattach = (stored: UIMessage[]) => setMount((m) => ({ generation: m.generation + 1, initial: stored }));
  return h(Chat, { key: mount.generation, initial: mount.initial, reattach });
}

void storedMessages().then((first) => createRoot(document.getElementById('root')!).render(h(App, { first })));
