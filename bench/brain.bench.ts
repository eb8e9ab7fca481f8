/**
 * µs per turn of the brain (one model reply with one tool call, then its result) at history
 * lengths 10, 1,000 and 10,000, beside a hand-written reducer doing the same decisions.
 * Flat columns mean no feed copies the committed history.
 */
import { createActor } from 'xstate';
import { loopMachine, nextStep } from '../machines/loop.machine.js';
import { LoopMachine } from '../src/brain/loop-machine.js';
import { DEFAULT_POLICY, type Message, type ToolMessage } from '../src/schemas.js';
import { medianOf, printTable } from './support.js';

const TURNS = 200;
const RUNS = 9;
const policy = { ...DEFAULT_POLICY, maxTurns: 1_000_000 };

function historyOf(length: number): Message[] {
  return Array.from({ length }, (_, i): Message =>
    i % 2 ? { role: 'assistant', content: `answer ${i}` } : { role: 'user', content: `question ${i}` },
  );
}

const reply = (turn: number) => ({
  role: 'assistant' as const,
  content: '',
  toolCalls: [{ id: `c${turn}`, name: 'lookup', args: { q: turn } }],
});
const result = (turn: number): ToolMessage => ({ role: 'tool', toolCallId: `c${turn}`, toolName: 'lookup', content: 'ok' });
const tools = ['lookup'];

/** What a careful person writes by hand: immutable updates, the same checks, no framework. */
interface HandState {
  state: 'Start' | 'AwaitingModel' | 'AwaitingTools';
  history: Message[];
  pending: Message[];
  pendingTools: { id: string; name: string }[];
  turnsTaken: number;
  contextTokens: number;
}
function handNext(s: HandState): HandState {
  if (s.turnsTaken >= policy.maxTurns) throw new Error('limit');
  if (s.contextTokens * 100 >= policy.contextWindow * 95) throw new Error('emergency');
  if (s.contextTokens * 100 > policy.contextWindow * policy.compactThreshold) throw new Error('threshold');
  return { ...s, state: 'AwaitingModel' };
}
function handReply(s: HandState, message: ReturnType<typeof reply>, tokens: number): HandState {
  const known = new Set(tools);
  return {
    ...s,
    state: 'AwaitingTools',
    pending: [...s.pending, message],
    pendingTools: message.toolCalls.filter((c) => known.has(c.name)),
    turnsTaken: s.turnsTaken + 1,
    contextTokens: tokens,
  };
}
function handResults(s: HandState, results: ToolMessage[]): HandState {
  if (results.length !== s.pendingTools.length) throw new Error('mismatch');
  return { ...s, state: 'Start', pending: [...s.pending, ...results], pendingTools: [] };
}

function perTurnMicros(work: () => void): number {
  const start = process.hrtime.bigint();
  work();
  return Number(process.hrtime.bigint() - start) / 1000 / TURNS;
}

export function run(): void {
  const rows: (string | number)[][] = [];
  for (const length of [10, 1_000, 10_000]) {
    const history = historyOf(length);
    const hand = medianOf(RUNS, () => {
      let s: HandState = { state: 'Start', history, pending: [{ role: 'user', content: 'go' }], pendingTools: [], turnsTaken: 0, contextTokens: 0 };
      return perTurnMicros(() => {
        for (let t = 1; t <= TURNS; t++) {
          s = handNext(s);
          s = handReply(s, reply(t), 1000);
          s = handResults(s, [result(t)]);
        }
      });
    });
    const actor = medianOf(RUNS, () => {
      const a = createActor(loopMachine, { input: { history } }).start();
      a.send({ type: 'acceptInput', message: { role: 'user', content: 'go' } });
      return perTurnMicros(() => {
        for (let t = 1; t <= TURNS; t++) {
          a.send({ type: 'next', policy });
          nextStep(a.getSnapshot(), policy);
          a.send({ type: 'modelResponse', response: reply(t), contextTokens: 1000, availableTools: tools });
          a.send({ type: 'toolResults', messages: [result(t)] });
        }
      });
    });
    const facade = medianOf(RUNS, () => {
      const m = new LoopMachine({ history });
      m.acceptInput({ role: 'user', content: 'go' });
      return perTurnMicros(() => {
        for (let t = 1; t <= TURNS; t++) {
          m.nextStep(policy);
          m.modelResponse(reply(t), 1000, tools);
          m.nextStep(policy);
          m.toolResults([result(t)]);
        }
      });
    });
    rows.push([length, hand, actor, facade, `${(actor / hand).toFixed(1)}x`, `${(facade / hand).toFixed(1)}x`]);
  }
  printTable(
    `brain: µs per turn (reply + 1 tool call + result), median of ${RUNS} runs of ${TURNS} turns`,
    ['history', 'hand reducer', 'loopMachine actor', 'LoopMachine facade', 'actor/hand', 'facade/hand'],
    rows,
  );
}
