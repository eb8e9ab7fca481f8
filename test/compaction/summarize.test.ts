/** summarizingCompactor: where it cuts, what it keeps, what it asks the model, how the brain adopts it. */
import { describe, expect, it } from 'vitest';
import type { CompactionRequest } from '../../src/compaction/contract.js';
import { summarizingCompactor } from '../../src/compaction/summarize.js';
import { coherentCut } from '../../src/brain/conversation.js';
import { LoopMachine } from '../../src/brain/loop-machine.js';
import type { Model, ModelRequest } from '../../src/model.js';
import { toWireMessages, toWireTools } from '../../src/models/openai-wire.js';
import type { Message } from '../../src/schemas.js';
import { estimateMessageTokens, estimateTokens } from '../../src/tokens.js';
import { checkChatRequest } from '../support/chat-server.js';
import { asst, call, providerValid, sys, toolMsg, user } from '../support/brain.js';

const SUMMARY_TEXT = 'the user wants the failing worker; a.log and b.log were clean';
const PREFIX = 'Summary of the earlier conversation:\n';

function summaryModel(name = 'summarizer') {
  const seen: ModelRequest[] = [];
  const model: Model = {
    name,
    async generate(request) {
      seen.push(request);
      return { message: { role: 'assistant', content: SUMMARY_TEXT }, finishReason: 'stop' };
    },
  };
  return { model, seen };
}

const log = (tag: string, lines: number) =>
  Array.from({ length: lines }, (_, i) => `10:00:${String(i).padStart(2, '0')} INFO ${tag} worker-${i % 7} ok`).join('\n');

/** Two system messages, the task, then tool groups (one parallel) and text turns. */
function conversation(): Message[] {
  return [
    sys('you read logs'),
    sys('answer briefly'),
    user('find the failing worker'),
    asst('reading a', [call('c1', 'read', { path: 'a.log' })]),
    toolMsg('c1', 'read', log('a', 15)),
    asst('a is clean'),
    user('check b and grep for errors'),
    asst('', [call('c2', 'read', { path: 'b.log' }), call('c3', 'grep', { pattern: 'ERR' })]),
    toolMsg('c2', 'read', log('b', 15)),
    toolMsg('c3', 'grep', 'no match', true),
    asst('still nothing', [call('c4', 'read', { path: 'c.log' })]),
    toolMsg('c4', 'read', log('c', 15)),
  ];
}

function request(messages: readonly Message[], model: Model, signal = new AbortController().signal): CompactionRequest {
  return {
    messages,
    model,
    signal,
    reason: 'ThresholdExceeded',
    tokensBefore: estimateTokens(messages),
    contextWindow: 8_000,
    tools: [],
    idempotencyKey: 'session:run-1:turn-3:compaction',
  };
}

/** keepTokens that makes the backwards walk stop exactly at `index` (the tail's first message before snapping). */
const keepFrom = (messages: readonly Message[], index: number) =>
  messages.slice(index).reduce((n, m) => n + estimateMessageTokens(m), 0);

describe('summarizingCompactor', () => {
  it('keeps the leading system messages and the task, summarizes up to a coherent cut, keeps the tail verbatim', async () => {
    const messages = conversation();
    const { model, seen } = summaryModel();
    const result = await summarizingCompactor({ keepTokens: keepFrom(messages, 6) })(request(messages, model));
    expect(result).not.toBeNull();
    expect(result!.messages).toEqual([
      messages[0],
      messages[1],
      messages[2],
      { role: 'assistant', content: PREFIX + SUMMARY_TEXT },
      ...messages.slice(6),
    ]);
    expect(result!.tokensAfter).toBe(estimateTokens(result!.messages));
    expect(result!.tokensAfter).toBeLessThan(estimateTokens(messages));
    expect(providerValid(result!.messages)).toBe(true);
    // The transcript covers exactly what was replaced.
    const transcript = seen[0]!.messages[1]!.content;
    expect(transcript).toContain('read({"path":"a.log"})');
    expect(transcript).toContain('assistant: a is clean');
    expect(transcript).not.toContain('find the failing worker');
    expect(transcript).not.toContain('b.log');
  });

  it('a tool-call group straddling the keep boundary stays whole in the tail', async () => {
    const messages = conversation();
    // The walk back stops inside the parallel group (at c3's result, then at c2's result).
    for (const inside of [8, 9]) {
      const { model, seen } = summaryModel();
      const result = await summarizingCompactor({ keepTokens: keepFrom(messages, inside) })(request(messages, model));
      expect(result!.messages.slice(-5)).toEqual(messages.slice(7));
      expect(result!.messages).toHaveLength(3 + 1 + 5);
      expect(seen[0]!.messages[1]!.content).not.toContain('grep({');
      expect(providerValid(result!.messages)).toBe(true);
    }
    // At the first group's result: the whole first group goes to the tail, nothing before it but the task.
    const { model, seen } = summaryModel();
    const result = await summarizingCompactor({ keepTokens: keepFrom(messages, 4) })(request(messages, model));
    expect(result).toBeNull();
    expect(seen).toHaveLength(0);
  });

  it('cuts only at coherent points for every tail size', async () => {
    const messages = conversation();
    const total = estimateTokens(messages);
    for (let keepTokens = 0; keepTokens <= total + 10; keepTokens += 7) {
      const { model } = summaryModel();
      const result = await summarizingCompactor({ keepTokens })(request(messages, model));
      if (result === null) continue;
      const out = result.messages;
      expect(out.slice(0, 3)).toEqual(messages.slice(0, 3));
      expect(out[3]).toEqual({ role: 'assistant', content: PREFIX + SUMMARY_TEXT });
      const tail = out.slice(4);
      const cut = messages.length - tail.length;
      expect(tail).toEqual(messages.slice(cut));
      expect(coherentCut(messages, cut)).toBe(cut);
      expect(cut).toBeGreaterThan(3);
      expect(tail.reduce((n, m) => n + estimateMessageTokens(m), 0)).toBeGreaterThanOrEqual(Math.min(keepTokens, estimateTokens(messages.slice(cut))));
      expect(providerValid(out)).toBe(true);
    }
  });

  it('returns null, without calling the model, when nothing is before the tail', async () => {
    const { model, seen } = summaryModel();
    const compactor = summarizingCompactor({ keepTokens: 1e9 });
    expect(await compactor(request(conversation(), model))).toBeNull();
    // Only the frame: systems and the task.
    expect(await summarizingCompactor({ keepTokens: 0 })(request([sys(), user('task')], model))).toBeNull();
    expect(await summarizingCompactor({ keepTokens: 0 })(request([], model))).toBeNull();
    expect(seen).toHaveLength(0);
  });

  it('keeps the task even when an assistant greeting opens the conversation', async () => {
    const messages: Message[] = [
      sys('you read logs'),
      asst('Hello! Which logs should I read?'),
      user('find the failing worker'),
      asst('', [call('c1', 'read', { path: 'a.log' })]),
      toolMsg('c1', 'read', log('a', 15)),
      asst('a is clean'),
    ];
    const { model, seen } = summaryModel();
    const result = await summarizingCompactor({ keepTokens: 1 })(request(messages, model));
    expect(result!.messages).toEqual([messages[0], messages[2], { role: 'assistant', content: PREFIX + SUMMARY_TEXT }, messages[5]]);
    expect(seen[0]!.messages[1]!.content).toContain('Hello! Which logs');
    expect(seen[0]!.messages[1]!.content).not.toContain('find the failing worker');
    expect(providerValid(result!.messages)).toBe(true);
  });

  it('sends a provider-valid summary request: instructions as system, transcript as user, no tools', async () => {
    const messages = conversation();
    const agentModel = summaryModel('agent');
    const own = summaryModel('own');
    const controller = new AbortController();
    await summarizingCompactor({ keepTokens: keepFrom(messages, 10), model: own.model, instructions: 'SUMMARIZE-FOR-TEST' })(
      request(messages, agentModel.model, controller.signal),
    );
    expect(agentModel.seen).toHaveLength(0);
    const sent = own.seen[0]!;
    expect(sent.messages.map((m) => m.role)).toEqual(['system', 'user']);
    expect(sent.messages[0]!.content).toBe('SUMMARIZE-FOR-TEST');
    expect(sent.tools).toEqual([]);
    expect(sent.signal).toBe(controller.signal);
    expect(providerValid(sent.messages)).toBe(true);
    const wire = { model: 'm', messages: toWireMessages(sent.messages), ...(sent.tools.length ? { tools: toWireTools(sent.tools) } : {}) };
    expect(checkChatRequest(wire)).toEqual([]);
    // Tool calls and results appear as text: the summarizer sees them without any tool protocol.
    expect(sent.messages[1]!.content).toContain('[tool grep result (error)]: no match');
    expect(sent.messages[1]!.content).toContain('[called read({"path":"b.log"}), grep({"pattern":"ERR"})]');
  });

  it('uses the agent model by default, with a key stable for the same conversation and distinct for another', async () => {
    const { model, seen } = summaryModel();
    const compactor = summarizingCompactor({ keepTokens: 1 });
    const messages = conversation();
    await compactor(request(messages, model));
    await compactor(request(messages, model));
    // Same shape (same length, same cut), different content: a position-only key would repeat.
    const other = conversation().map((m) => (m.role === 'tool' ? { ...m, content: `${m.content} (rerun)` } : m));
    await compactor(request(other, model));
    expect(seen).toHaveLength(3);
    expect(seen[0]!.idempotencyKey).toBe(seen[1]!.idempotencyKey);
    expect(seen[2]!.idempotencyKey).not.toBe(seen[0]!.idempotencyKey);
  });

  it('the brain folds the summary and a tail opening with an assistant turn into one message (compactionResult)', async () => {
    const messages = conversation();
    const { model } = summaryModel();
    // Tail = [asst('still nothing', c4), result]: opens with an assistant turn that carries a call.
    const result = await summarizingCompactor({ keepTokens: keepFrom(messages, 10) })(request(messages, model));
    expect(result!.messages.slice(3)).toEqual([{ role: 'assistant', content: PREFIX + SUMMARY_TEXT }, ...messages.slice(10)]);

    const brain = new LoopMachine({ history: messages.slice(0, 6) });
    brain.acceptInput(user('check b and grep for errors'));
    brain.nextStep();
    brain.modelResponse(messages[7] as Extract<Message, { role: 'assistant' }>, 500, ['read', 'grep']);
    brain.toolResults([messages[8], messages[9]] as Extract<Message, { role: 'tool' }>[]);
    brain.nextStep();
    brain.modelResponse(messages[10] as Extract<Message, { role: 'assistant' }>, 500, ['read', 'grep']);
    brain.toolResults([messages[11]] as Extract<Message, { role: 'tool' }>[]);
    brain.setContextTokens(900);
    expect(brain.nextStep({ contextWindow: 1000 })).toEqual({ type: 'Compact', reason: 'ThresholdExceeded' });
    expect(brain.fullHistory()).toEqual(messages);

    brain.compactionResult(result!.messages, 900, result!.tokensAfter, { contextWindow: 1000 });
    const folded = {
      role: 'assistant',
      content: `${PREFIX}${SUMMARY_TEXT}\n\nstill nothing`,
      toolCalls: [call('c4', 'read', { path: 'c.log' })],
    };
    expect(brain.history()).toEqual([...messages.slice(0, 3), folded, messages[11]]);
    expect(providerValid(brain.history())).toBe(true);
    expect(brain.state()).toEqual({ type: 'Start' });

    // A tail opening with a user message is not folded into.
    const userTail = await summarizingCompactor({ keepTokens: keepFrom(messages, 6) })(request(messages, model));
    const other = new LoopMachine({ history: [] });
    other.acceptInput(user('x'));
    other.setContextTokens(960);
    other.nextStep({ contextWindow: 1000 });
    other.compactionResult(userTail!.messages, 960, userTail!.tokensAfter, { contextWindow: 1000 });
    expect(other.history()).toEqual(userTail!.messages);
  });
});
