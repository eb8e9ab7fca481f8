/**
 * Handoffs (issue 22 item 2): the model calls `transfer_to_<name>` and that agent's instructions,
 * tools and model take over; who speaks is in the context and the session row, survives a
 * reopen, and shows in the trace, the viewer rows and `sessions show`'s state line.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createActor, type InspectionEvent } from 'xstate';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import { type AgentOutput } from '../../../src/agent/protocol/actor-types.js';
import type { AgentConfig } from '../../../src/agent/core/config.js';
import { compileAgent } from '../../../src/agent/core/compile.js';
import {
  activeAgentProblem,
  compileTeam,
  presentHistory,
  settleHandoff,
  speakerOf,
  teamSpeakers,
  withoutForeignTools,
  type HandoffsConfig,
} from '../../../src/agent/handoffs/handoffs.js';
import { InvalidConfigError } from '../../../src/errors.js';
import { describeState } from '../../../src/cli/transcript.js';
import { InvalidSnapshotError } from '../../../src/errors.js';
import type { Model, ModelRequest } from '../../../src/model.js';
import { scriptedModel, type ScriptEntry } from '../../../src/models/scripted.js';
import type { Message, ToolCall, ToolMessage } from '../../../src/schemas.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { readSessionTrace } from '../../../src/sessions/trace.js';
import { SqliteSessionStore } from '../../../src/stores/sqlite.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { rowsOf } from '../../../src/viewer/rows.js';
import { loadSessionView } from '../../../src/viewer/load.js';

const refund = defineTool({ name: 'refund', description: 'Refunds an order.', input: z.object({ order: z.string() }), execute: ({ order }) => `refunded ${order}` });
const lookup = defineTool({ name: 'lookup', description: 'Finds an order.', input: z.object({ user: z.string() }), execute: () => 'order A-7' });
const call = (name: string, id: string, args: unknown = {}): ScriptEntry => ({ toolCalls: [{ id, name, args }] });

/** A model that records what it was asked and answers with the next entry of `replies`, whatever it was shown. */
function recording(name: string, replies: ScriptEntry[]): Model & { seen: ModelRequest[] } {
  const seen: ModelRequest[] = [];
  let next = 0;
  const answer = (request: ModelRequest) => {
    seen.push(request);
    const reply = replies[next++];
    if (!reply) throw new Error(`${name} has no reply ${next}`);
    return typeof reply === 'function' ? reply(request) : reply;
  };
  return { ...scriptedModel(Array.from({ length: 50 }, () => answer as never), { name }), seen };
}

function team(history?: HandoffsConfig['history']) {
  const triage = recording('triage-model', [call('lookup', 'l1', { user: 'ann' }), call('transfer_to_billing', 't1'), { text: 'Anything else?' }]);
  const billing = recording('billing-model', [call('refund', 'r1', { order: 'A-7' }), { text: 'Refunded A-7.' }]);
  const config: AgentConfig = {
    model: triage,
    instructions: 'You are triage.',
    tools: [lookup],
    handoffs: {
      name: 'triage',
      agents: [{ name: 'billing', description: 'Refunds.', instructions: 'You are billing.', tools: [refund], model: billing, handoffs: ['triage'] }],
      ...(history && { history }),
    },
  };
  return { triage, billing, config };
}

function run(config: AgentConfig, inspect?: (event: InspectionEvent) => void) {
  const actor = createActor(createAgentMachine(config), { input: { sessionId: 's', prompt: 'Refund my order.' }, ...(inspect && { inspect }) });
  const handoffs: unknown[] = [];
  actor.on('agent.handoff', (event) => handoffs.push(event));
  const done = new Promise<AgentOutput>((resolve, reject) => actor.subscribe({ complete: () => resolve(actor.getSnapshot().output!), error: reject }));
  actor.start();
  return { actor, done, handoffs };
}

const names = (request: ModelRequest) => request.tools?.map((tool) => tool.name) ?? [];

describe('handoffs in the driver', () => {
  it("a transfer call hands over: the new agent's instructions, tools and model take the next call, and the run goes on to its answer", async () => {
    const { triage, billing, config } = team();
    const states: string[] = [];
    const { actor, done, handoffs } = run(config, (event) => {
      if (event.type === '@xstate.microstep') states.push(JSON.stringify((event.snapshot as unknown as { value: unknown }).value));
    });
    const output = await done;
    expect(output.outcome).toEqual({ type: 'Completed', finalText: 'Refunded A-7.' });
    expect(triage.seen).toHaveLength(2);
    expect(billing.seen).toHaveLength(2);
    expect(triage.seen[0]!.messages[0]).toEqual({ role: 'system', content: 'You are triage.' });
    expect(names(triage.seen[0]!)).toEqual(['lookup', 'transfer_to_billing']);
    expect(billing.seen[0]!.messages[0]).toEqual({ role: 'system', content: 'You are billing.' });
    expect(names(billing.seen[0]!)).toEqual(['refund', 'transfer_to_triage']);
    // 'whole' (the default): the triage agent's tool traffic is shown to billing as it was.
    expect(billing.seen[0]!.messages.slice(1)).toEqual(output.messages.slice(0, 5));
    expect(handoffs).toEqual([{ type: 'agent.handoff', run: 1, turn: 2, name: 'billing', from: 'triage' }]);
    expect(actor.getSnapshot().context.agent).toEqual({ name: 'billing', from: 'triage' });
    // The chart passes through its HandingOff state: an inspector sees the microstep.
    expect(states.some((state) => state.includes('HandingOff'))).toBe(true);
  });

  it("'filtered' shows the new agent the conversation without the tool traffic of tools it does not have", async () => {
    const { billing, config } = team('filtered');
    await run(config).done;
    expect(billing.seen[0]!.messages).toEqual([
      { role: 'system', content: 'You are billing.' },
      { role: 'user', content: 'Refund my order.' },
    ]);
    // Its own calls stay in its view.
    expect(billing.seen[1]!.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool']);
  });

  it('a function presents the history as it likes (a summary), with the handoff it is for', async () => {
    const seen: unknown[] = [];
    const { billing, config } = team((messages, handoff) => {
      seen.push(handoff);
      return [{ role: 'user', content: `summary of ${messages.length} messages` }];
    });
    await run(config).done;
    expect(billing.seen[0]!.messages).toEqual([{ role: 'system', content: 'You are billing.' }, { role: 'user', content: 'summary of 5 messages' }]);
    expect(seen[0]).toEqual({ agent: 'billing', from: 'triage' });
  });

  it('a call to a tool only another agent has is refused like an unknown tool', async () => {
    const triage = recording('t', [call('refund', 'x1', { order: 'A' }), { text: 'ok' }]);
    const config: AgentConfig = { model: triage, handoffs: { agents: [{ name: 'billing', description: 'Refunds.', tools: [refund] }] } };
    const output = await run(config).done;
    const result = output.messages.find((m): m is ToolMessage => m.role === 'tool')!;
    expect(result.isError).toBe(true);
    expect(result.content).not.toContain('refunded');
  });
});

describe('handoffs in a durable session', () => {
  let dir: string;
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('who speaks is in the session row: a session reopened from the SQLite file goes on with the agent that has it', async () => {
    dir = mkdtempSync(join(tmpdir(), 'handoff-'));
    const file = join(dir, 's.db');
    const first = team();
    let store = new SqliteSessionStore({ path: file });
    let session = await DurableSession.open({ machine: createAgentMachine(first.config), store, sessionId: 'h' });
    session.send({ type: 'input', message: 'Refund my order.' });
    expect((await session.whenIdle())?.outcome).toEqual({ type: 'Completed', finalText: 'Refunded A-7.' });
    await session.close();
    await store.close();

    // A new store and machine (as another process would build them): the next run is billing's.
    const billing = recording('billing-model', [{ text: 'Billing here again.' }]);
    const triage = recording('triage-model', []);
    const config: AgentConfig = {
      ...first.config,
      model: triage,
      handoffs: { ...first.config.handoffs!, agents: [{ ...first.config.handoffs!.agents[0]!, model: billing }] },
    };
    store = new SqliteSessionStore({ path: file });
    session = await DurableSession.open({ machine: createAgentMachine(config), store, sessionId: 'h' });
    expect(session.actor.getSnapshot().context.agent).toEqual({ name: 'billing', from: 'triage' });
    expect(describeState(session.actor.getSnapshot().context, false)).toContain('with agent billing (handed over by triage)');
    session.send({ type: 'input', message: 'Thanks.' });
    expect((await session.whenIdle())?.outcome).toEqual({ type: 'Completed', finalText: 'Billing here again.' });
    expect(triage.seen).toHaveLength(0);
    expect(billing.seen[0]!.messages[0]).toEqual({ role: 'system', content: 'You are billing.' });
    const trace = await readSessionTrace(store, 'h');
    const entries = trace.flatMap((record) => ('entry' in record && record.entry.type === 'handoff' ? [record.entry] : []));
    expect(entries).toMatchObject([{ type: 'handoff', run: 1, turn: 2, from: 'triage', to: 'billing' }]);
    expect((await loadSessionView(store, 'h'))!.state!.agent).toEqual({ name: 'billing', from: 'triage' });
    expect(rowsOf({ session: (await loadSessionView(store, 'h'))! }).rows.filter((row) => row.kind === 'handoff').map((row) => row.title)).toEqual(['handoff after turn 2: triage → billing']);
    await session.close();
    await store.close();

    // A machine without that agent cannot go on with the session: refused, nothing changed.
    store = new SqliteSessionStore({ path: file });
    await expect(DurableSession.open({ machine: createAgentMachine({ model: triage }), store, sessionId: 'h' })).rejects.toThrow(InvalidSnapshotError);
    await store.close();
  });
});

describe('handoff rules', () => {
  const compile = (handoffs: HandoffsConfig, own = [lookup]) => compileTeam({ handoffs, instructions: 'entry', own, shared: [], models: 1 });
  const billing = { name: 'billing', description: 'Refunds.', tools: [refund] };

  it('checks the team once: unknown targets, names used twice, bad names, self-handoffs and two tools of one name are InvalidConfigError; cycles are fine', () => {
    expect(compile({ agents: [] })).toMatchObject({ entry: 'main' });
    expect(() => compile({ agents: [billing, { ...billing }] })).toThrow(/'billing' is used twice/);
    expect(() => compile({ name: 'billing', agents: [billing] })).toThrow(InvalidConfigError);
    expect(() => compile({ agents: [{ ...billing, handoffs: ['nobody'] }] })).toThrow(/hands off to 'nobody', which is not in the team/);
    expect(() => compile({ to: ['nobody'], agents: [billing] })).toThrow(InvalidConfigError);
    expect(() => compile({ agents: [{ ...billing, name: 'transfer to x' }] })).toThrow(InvalidConfigError);
    expect(() => compile({ agents: [{ ...billing, handoffs: ['billing'] }] })).toThrow(/cannot hand off to itself/);
    const other = defineTool({ name: 'lookup', description: 'Another.', input: z.object({}), execute: () => '' });
    expect(() => compile({ agents: [{ ...billing, tools: [other] }] })).toThrow(/two different tools are named 'lookup'/);
    // The same tool object shared by two agents is one tool.
    expect(compile({ agents: [{ ...billing, tools: [lookup] }] })!.tools.map((tool) => tool.name)).toEqual(['lookup', 'transfer_to_billing']);
    const cycle = compile({ name: 'a', agents: [{ name: 'b', description: 'B.', handoffs: ['a', 'c'] }, { name: 'c', description: 'C.', handoffs: ['b'] }] })!;
    expect(speakerOf(cycle, { name: 'b', from: 'a' }).offered.names).toEqual(['transfer_to_a', 'transfer_to_c']);
    expect(speakerOf(cycle, undefined).offered.names).toEqual(['lookup', 'transfer_to_b', 'transfer_to_c']);
  });

  it('a handoff agent without a model speaks with the entry agent\'s; one with a model gets the next index', () => {
    const m: Model = { name: 'm', generate: () => Promise.reject(new Error('no')) };
    const t = compile({ agents: [billing, { name: 'x', description: 'X.', model: m }] })!;
    expect([speakerOf(t, undefined).model, speakerOf(t, { name: 'billing', from: 'main' }).model, speakerOf(t, { name: 'x', from: 'main' }).model]).toEqual([null, null, 1]);
    expect(t.models).toEqual([{ model: m, prices: undefined }]);
  });

  it('the first successful transfer of a batch wins; a later one gets an error result; a failed one hands nothing', () => {
    const t = compile({ agents: [billing, { name: 'x', description: 'X.' }] })!;
    const c = (name: string, id: string): ToolCall => ({ id, name, args: {} });
    const r = (id: string, name: string, isError = false): ToolMessage => ({ role: 'tool', toolCallId: id, toolName: name, content: 'ok', ...(isError && { isError }) });
    expect(settleHandoff(t, undefined, [{ call: c('lookup', '1'), result: r('1', 'lookup') }])).toBeNull();
    expect(settleHandoff(t, undefined, [{ call: c('transfer_to_x', '1'), result: r('1', 'transfer_to_x', true) }])).toBeNull();
    const settled = settleHandoff(t, undefined, [
      { call: c('transfer_to_x', '1'), result: r('1', 'transfer_to_x', true) },
      { call: c('transfer_to_billing', '2'), result: r('2', 'transfer_to_billing') },
      { call: c('transfer_to_x', '3'), result: r('3', 'transfer_to_x') },
    ])!;
    expect(settled.to).toEqual({ name: 'billing', from: 'main' });
    expect(settled.results.map((m) => [m.toolCallId, m.isError ?? false])).toEqual([['1', true], ['2', false], ['3', true]]);
    expect(settled.results[2]!.content).toBe('Not transferred: this reply already hands the conversation to billing.');
  });

  it("'filtered' drops the calls and results of tools outside the set, keeps text, and stays coherent", () => {
    const history: Message[] = [
      { role: 'user', content: 'q' },
      { role: 'assistant', content: 'looking', toolCalls: [{ id: 'a', name: 'lookup', args: {} }, { id: 'b', name: 'refund', args: {} }] },
      { role: 'tool', toolCallId: 'a', toolName: 'lookup', content: 'A' },
      { role: 'tool', toolCallId: 'b', toolName: 'refund', content: 'B' },
      { role: 'assistant', content: '', toolCalls: [{ id: 'c', name: 'lookup', args: {} }] },
      { role: 'tool', toolCallId: 'c', toolName: 'lookup', content: 'C' },
    ];
    expect(withoutForeignTools(history, new Set(['refund']))).toEqual([
      { role: 'user', content: 'q' },
      { role: 'assistant', content: 'looking', toolCalls: [{ id: 'b', name: 'refund', args: {} }] },
      { role: 'tool', toolCallId: 'b', toolName: 'refund', content: 'B' },
    ]);
    expect(withoutForeignTools(history, new Set())).toEqual([{ role: 'user', content: 'q' }, { role: 'assistant', content: 'looking' }]);
  });

  it('presents nothing differently before any handoff, and refuses a presentation that returns no messages', () => {
    const t = compile({ history: () => [{ role: 'user', content: 's' }], agents: [{ ...billing, history: () => 'nope' as never }] })!;
    const messages: Message[] = [{ role: 'user', content: 'q' }];
    expect(presentHistory(speakerOf(t, undefined), undefined, messages)).toBe(messages);
    expect(presentHistory(speakerOf(t, { name: 'main', from: 'billing' }), { name: 'main', from: 'billing' }, messages)).toEqual([{ role: 'user', content: 's' }]);
    expect(() => presentHistory(speakerOf(t, { name: 'billing', from: 'main' }), { name: 'billing', from: 'main' }, messages)).toThrow(/agent 'billing' returned no list/);
  });

  it("gives the loop its speakers: the entry agent until a handoff, then the active one, shown the conversation its own way", () => {
    const t = compile({ agents: [{ ...billing, history: () => [{ role: 'user', content: 'summary' }] }] })!;
    const speakers = teamSpeakers(t);
    expect(speakers.entry).toBe('main');
    expect(speakers.of(undefined)).toBe(speakerOf(t, undefined));
    const active = { name: 'billing', from: 'main' };
    expect(speakers.of(active).name).toBe('billing');
    expect(speakers.of(active).offered.names).toContain('refund');
    const messages: Message[] = [{ role: 'user', content: 'q' }];
    expect(speakers.present(undefined, messages)).toBe(messages);
    expect(speakers.present(active, messages)).toEqual([{ role: 'user', content: 'summary' }]);
    // Compiled, an agent with handoffs has them; one without has none, and the loop asks nobody who speaks.
    expect(compileAgent({ model: scriptedModel([]), handoffs: { agents: [billing] } }).speakers?.entry).toBe('main');
    expect(compileAgent({ model: scriptedModel([]) }).speakers).toBeNull();
  });

  it('a stored active agent this team lacks (or an agent without handoffs) is a problem named', () => {
    const t = compile({ agents: [billing] });
    expect(activeAgentProblem(t, undefined)).toBeNull();
    expect(activeAgentProblem(t, { name: 'billing', from: 'main' })).toBeNull();
    expect(activeAgentProblem(t, { name: 'gone', from: 'main' })).toMatch(/'gone', which this team does not have/);
    expect(activeAgentProblem(null, { name: 'billing', from: 'main' })).toMatch(/has no handoffs/);
  });
});
