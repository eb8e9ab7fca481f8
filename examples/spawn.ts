/**
 * The agent as a child actor: a support-ticket workflow (triage → investigate → resolve or
 * escalate) invokes the agent machine with the ticket text as its prompt and moves on with the
 * agent's output (`onDone` → `event.output.outcome`).
 *
 *   npx tsx examples/spawn.ts
 *
 * The investigator reads the log files of examples/fixtures on the scripted model. Its answer
 * starts with FOUND or NOT FOUND, the kind of contract you would put in a real model's prompt; an
 * answer without FOUND, or a run that ends in any other way than Completed, goes to a human.
 */
import { assign, createActor, fromPromise, setup, toPromise, type AnyActorRef } from 'xstate';
import {
  createAgentMachine,
  type AgentActor,
  type AgentOutput,
  type Message,
  type ToolMessage,
} from '../src/index.js';
import { scriptedModel, type ScriptEntry } from '../src/testing.js';
import { listDirTool, readFileTool, DirListingSchema } from '../src/tools/builtin.js';
import { DEFAULT_FOLDER } from './folder-agent.js';
import { cut, traceAgent, type Trace } from './trace.js';

interface Ticket {
  id: number;
  from: string;
  text: string;
}

const TICKETS: Ticket[] = [
  { id: 101, from: 'ada', text: 'My invoice from 2 March never arrived. Did the nightly export fail?' },
  { id: 102, from: 'grace', text: 'The darjeeling price on the shop page looks wrong to me.' },
  { id: 103, from: 'linus', text: 'Please refund order 1003, the oolong arrived damaged.' },
];

// ---------------------------------------------------------------------------------------------
// The investigator: an agent with read-only file tools and a scripted model that greps the logs.

const INVESTIGATOR_PROMPT =
  'You investigate support tickets by reading the service logs in the folder (list_dir, read_file). ' +
  'Start your answer with "FOUND:" and the cause when the logs explain the ticket, otherwise with "NOT FOUND:".';

const investigatorScript: ScriptEntry[] = [
  () => ({ text: 'Looking for logs.', toolCalls: [{ name: 'list_dir', args: { path: '.' } }] }),
  (request) => {
    const listing = toolResult(request.messages, 'list_dir');
    const logs = listing && !listing.isError
      ? DirListingSchema.parse(JSON.parse(listing.content)).entries.filter((e) => e.type === 'file' && e.name.endsWith('.log'))
      : [];
    if (logs.length === 0) return { text: 'NOT FOUND: there are no logs to look at.' };
    return { toolCalls: logs.map((log) => ({ name: 'read_file', args: { path: log.name } })) };
  },
  (request) => {
    // The ERROR line sharing the most words with the ticket, at least two ("invoice" matches "invoices").
    const ticketWords = wordsOf(firstUserText(request.messages));
    const errors = request.messages
      .filter((m): m is ToolMessage => m.role === 'tool' && m.toolName === 'read_file' && !m.isError)
      .flatMap((m) => m.content.split('\n'))
      .filter((line) => / ERROR /.test(line))
      .map((line) => line.replace(/^\S+\s+ERROR\s+/, ''));
    const score = (line: string) => wordsOf(line).filter((w) => ticketWords.some((t) => w.startsWith(t) || t.startsWith(w))).length;
    const best = errors.reduce<string | undefined>((a, b) => (score(b) > (a === undefined ? 1 : score(a)) ? b : a), undefined);
    if (best === undefined) {
      return { text: `NOT FOUND: the logs have ${errors.length} error line(s), none about this ticket.` };
    }
    const times = errors.filter((line) => line === best).length;
    return { text: `FOUND: "${best}" (${times} time${times === 1 ? '' : 's'} in the log).` };
  },
];

function toolResult(messages: readonly Message[], toolName: string): ToolMessage | undefined {
  return messages.findLast((m): m is ToolMessage => m.role === 'tool' && m.toolName === toolName);
}
const wordsOf = (text: string): string[] => text.toLowerCase().match(/[a-z]{4,}/g) ?? [];
function firstUserText(messages: readonly Message[]): string {
  return messages.find((m) => m.role === 'user')?.content ?? '';
}

const investigator = createAgentMachine({
  model: scriptedModel(investigatorScript, { name: 'scripted-investigator', delayMs: 150 }),
  tools: [listDirTool({ root: DEFAULT_FOLDER }), readFileTool({ root: DEFAULT_FOLDER })],
  policy: { maxTurns: 6 },
});

// ---------------------------------------------------------------------------------------------
// The parent statechart.

interface TicketContext {
  ticket: Ticket;
  category: Category | null;
  agent: AgentOutput | null;
  status: 'open' | 'resolved' | 'escalated';
  resolution: string;
}
type Category = 'refund' | 'technical';

/** Triage: a quick classifier (a rule here; a small, cheap model in real life). */
const classify = fromPromise<Category, Ticket>(async ({ input }) => {
  await new Promise((resolve) => setTimeout(resolve, 100));
  return /\brefund/i.test(input.text) ? 'refund' : 'technical';
});

const foundCause = (output: AgentOutput) => output.outcome.type === 'Completed' && output.outcome.finalText.startsWith('FOUND');

export const ticketMachine = setup({
  types: {
    context: {} as TicketContext,
    input: {} as Ticket,
    output: {} as { status: TicketContext['status']; resolution: string },
  },
  actors: { classify, investigator },
  delays: { investigationBudget: 30_000 },
}).createMachine({
  id: 'ticket',
  context: ({ input }) => ({ ticket: input, category: null, agent: null, status: 'open', resolution: '' }),
  initial: 'triage',
  states: {
    triage: {
      invoke: {
        src: 'classify',
        input: ({ context }) => context.ticket,
        // Refunds are a human's call; everything else gets investigated first.
        onDone: [
          {
            guard: ({ event }) => event.output === 'refund',
            target: 'escalated',
            actions: assign({ category: 'refund', resolution: 'refund requests go to a human' }),
          },
          { target: 'investigating', actions: assign({ category: ({ event }) => event.output }) },
        ],
        onError: { target: 'escalated', actions: assign({ resolution: 'triage failed' }) },
      },
    },
    investigating: {
      invoke: {
        id: 'investigator',
        src: 'investigator',
        input: ({ context }) => ({
          sessionId: `ticket-${context.ticket.id}`,
          history: [{ role: 'system' as const, content: INVESTIGATOR_PROMPT }],
          prompt: context.ticket.text,
        }),
        onDone: [
          {
            guard: ({ event }) => foundCause(event.output),
            target: 'resolved',
            actions: assign({ agent: ({ event }) => event.output, resolution: ({ event }) => finalText(event.output) }),
          },
          {
            target: 'escalated',
            actions: assign({
              agent: ({ event }) => event.output,
              resolution: ({ event }) => `agent ended ${event.output.outcome.type}: ${finalText(event.output)}`,
            }),
          },
        ],
        onError: {
          target: 'escalated',
          actions: assign({ resolution: ({ event }) => `agent crashed: ${String(event.error)}` }),
        },
      },
      // Leaving the state stops the child agent, which cancels its in-flight calls.
      after: { investigationBudget: { target: 'escalated', actions: assign({ resolution: 'investigation took too long' }) } },
    },
    resolved: { type: 'final', entry: assign({ status: 'resolved' }) },
    escalated: { type: 'final', entry: assign({ status: 'escalated' }) },
  },
  output: ({ context }) => ({ status: context.status, resolution: context.resolution }),
});

function finalText(output: AgentOutput): string {
  return output.outcome.type === 'Completed' ? output.outcome.finalText : '(no answer)';
}

// ---------------------------------------------------------------------------------------------

const summary: string[] = [];
for (const ticket of TICKETS) {
  console.log(`\nticket #${ticket.id} from ${ticket.from}: "${ticket.text}"`);
  const parent = createActor(ticketMachine, { input: ticket });
  let childTrace: Trace | undefined;
  let shown = '';
  parent.subscribe((snapshot) => {
    if (snapshot.value !== shown) console.log(`  [ticket #${ticket.id}] state: ${(shown = snapshot.value)}`);
    // The invoked agent is the parent's child while `investigating`: trace it, nested.
    const child = snapshot.children.investigator as AnyActorRef | undefined;
    if (child && !childTrace) childTrace = traceAgent(child as unknown as AgentActor, { indent: '      │ ', maxChars: 90 });
    if (!child && childTrace) {
      childTrace.stop();
      childTrace = undefined;
    }
  });
  parent.start();
  const result = await toPromise(parent);
  childTrace?.stop();
  console.log(`  [ticket #${ticket.id}] ${result.status}: ${cut(result.resolution, 160)}`);
  summary.push(`#${ticket.id} ${result.status.padEnd(9)} ${cut(result.resolution, 120)}`);
}
console.log(`\nsummary\n  ${summary.join('\n  ')}`);
