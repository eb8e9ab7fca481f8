/**
 * The features of the conformance matrix (issue 41), each as one scenario every host runs: the
 * agent's config, the prompt, the driving script (what to answer when the run waits, what to do
 * while it runs) and what the result must be. A scenario knows nothing of hosts: it sees the
 * normalized result a host driver gives (test/agent/matrix/hosts.ts).
 *
 * Scripted models pick their reply by the number of assistant messages in the request, so a
 * fresh config (a restored process, another host) serves the same script.
 */
import { expect } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { AgentConfig } from '../../../src/agent/core/config.js';
import type { ApprovalRequest } from '../../../src/agent/approvals/approval-binding.js';
import type { Operation } from '../../../src/agent/operations/operation.js';
import { agentTool } from '../../../src/agent/subagents/agent-tool.js';
import { summarizingCompactor } from '../../../src/compaction/summarize.js';
import type { Model } from '../../../src/model.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import type { Message } from '../../../src/schemas.js';
import { defineTool, type Tool } from '../../../src/tools/define-tool.js';
import { estimateTokens } from '../../../src/tokens.js';

/** The features, in the order of the issue (rows of the table). */
export const FEATURES = [
  'structured-output',
  'input-guardrail',
  'output-guardrail',
  'tool-policy',
  'approvals',
  'in-doubt',
  'budget-pause',
  'time-budget',
  'fallback',
  'repetition',
  'subagents',
  'handoffs',
  'steering',
  'cancel',
  'compaction',
  'operations',
  'delivery',
] as const;
export type FeatureId = (typeof FEATURES)[number];

/** Something the run waits for, as a host sees it. */
export type Wait =
  | { kind: 'approval'; request: ApprovalRequest }
  | { kind: 'operation'; operation: string; reason: string }
  | { kind: 'budget'; limit: string }
  | { kind: 'doubt'; request: ApprovalRequest };

/** The script's answer to a wait: a decision on a call, or an event for the run. */
export type Answer =
  | { approve: boolean }
  | { doubt: { action: 'rerun' | 'fail' } | { action: 'result'; result: unknown } }
  | { resume: { operation: string; payload: unknown } }
  | { raise: Record<string, number> };

/** What every host driver reports of a run, whatever its API. */
export interface RunResult {
  outcome: { type: string; reason?: string | undefined; errorType?: string | undefined; output?: unknown; finalText?: string | undefined };
  /** The final answer when Completed, else ''. */
  text: string;
  /** The tool results of the committed conversation, in order. */
  toolCalls: { name: string; content: string; isError: boolean }[];
  /** The messages the run committed (history included). */
  messages: Message[];
  /** The agent's emitted events, for hosts that expose them (null where the host has none). */
  events: { type: string; id?: string | undefined }[] | null;
  /** What the host refused while the run went (a steer it has no way for), in its own words. */
  refusals?: string[] | undefined;
}

/** Counters the scenario's tools and models keep, and the latch a scenario's run stops at. */
export class Probe {
  readonly ran: string[] = [];
  modelCalls = 0;
  /** Resolves when the latch tool starts. */
  readonly reached: Promise<void>;
  #reach!: () => void;
  #release!: () => void;
  readonly released: Promise<void>;
  constructor() {
    this.reached = new Promise((resolve) => (this.#reach = resolve));
    this.released = new Promise((resolve) => (this.#release = resolve));
  }
  reach(): void {
    this.#reach();
  }
  release(): void {
    this.#release();
  }
}

export interface Scenario {
  id: FeatureId;
  title: string;
  prompt: string;
  /** A fresh agent config and its probe. */
  setup(): { config: AgentConfig; probe: Probe };
  /** What the driving script answers when the run waits (undefined: the scenario never waits). */
  answer?(wait: Wait): Answer;
  /** Done while the run is held at the latch tool (then the latch is released). */
  during?: { steer: string } | 'cancel';
  /**
   * The run is cut off while its latch tool runs (the process dies, as a crash leaves it) and
   * the session is opened again: only hosts that keep a run outside their process can.
   */
  crash?: true;
  /** Bounds the run in time (default 10 s). */
  timeoutMs?: number;
  check(result: RunResult, probe: Probe): void;
}

/** A tool that records each run in the probe. */
const recorded = (probe: Probe, name: string, options: Partial<Pick<Tool, 'needsApproval' | 'inDoubt'>> = {}) =>
  defineTool({
    name,
    description: `The ${name} tool.`,
    input: z.object({ what: z.string() }),
    ...options,
    execute: ({ what }) => {
      probe.ran.push(`${name}:${what}`);
      return `${name} done: ${what}`;
    },
  });

/** The tool a run stops at: it signals the probe and returns once released (or its signal aborts). */
const latch = (probe: Probe, options: Partial<Pick<Tool, 'inDoubt'>> = {}) =>
  defineTool({
    name: 'wait_here',
    description: 'Takes a while.',
    input: z.object({}),
    ...options,
    execute: async (_args, ctx) => {
      probe.ran.push('wait_here');
      probe.reach();
      await Promise.race([probe.released, new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }))]);
      if (ctx.signal.aborted) throw new Error('aborted');
      return 'waited';
    },
  });

/** A scripted model that also counts its calls in the probe. */
const counted = (probe: Probe, model: Model): Model => ({
  ...model,
  generate: (request) => {
    probe.modelCalls++;
    return model.generate(request);
  },
});

const toolText = (result: RunResult) => result.toolCalls.map((call) => `${call.name}=${call.content}`);

const City = z.object({ city: z.string(), population: z.number().int() });

/** The CI gate of docs/agent/operations.md: yields before a deploy until the CI result arrives. */
const ciGate: Operation<{ ci: string }, { status: 'passed' | 'failed' }> = {
  name: 'ci-gate',
  state: { schema: z.object({ ci: z.string() }), initial: { ci: 'unknown' } },
  resume: { schema: z.object({ status: z.enum(['passed', 'failed']) }), apply: ({ status }) => ({ state: { ci: status } }) },
  beforeTools(calls, ctx) {
    if (ctx.state.ci === 'unknown' && calls.some(({ call }) => call.name === 'deploy')) return { yield: { reason: 'ci-result' } };
  },
};

const words = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `${tag}${i}`).join(' ');

export const SCENARIOS: readonly Scenario[] = [
  {
    id: 'structured-output',
    title: 'structured output: an invalid answer goes back, the valid one is the output',
    prompt: 'The largest city of the Rhône?',
    setup: () => {
      const probe = new Probe();
      const model = scriptedModel([
        { toolCalls: [{ name: 'final_answer', args: { city: 'Lyon', population: 'about half a million' } }] },
        { toolCalls: [{ name: 'final_answer', args: { city: 'Lyon', population: 520000 } }] },
      ]);
      return { probe, config: { model: counted(probe, model), output: City, retry: false } };
    },
    check: (result, probe) => {
      expect(result.outcome.type).toBe('Completed');
      expect(result.outcome.output).toEqual({ city: 'Lyon', population: 520000 });
      expect(JSON.parse(result.text)).toEqual({ city: 'Lyon', population: 520000 });
      expect(probe.modelCalls).toBe(2);
    },
  },
  {
    id: 'input-guardrail',
    title: 'input guardrail: a tripped input never reaches the model',
    prompt: 'My key is sk-abcdefghijklmnopqrstuvwxyz, keep it.',
    setup: () => {
      const probe = new Probe();
      return {
        probe,
        config: {
          model: counted(probe, scriptedModel([{ text: 'never' }])),
          retry: false,
          guardrails: { input: [{ name: 'no-keys', check: ({ text }) => (/sk-[a-z]{20,}/.test(text) ? { type: 'trip', info: { found: 'api key' } } : { type: 'pass' }) }] },
        },
      };
    },
    check: (result, probe) => {
      expect(result.outcome).toMatchObject({ type: 'Failed', errorType: 'GuardrailTripped' });
      expect(probe.modelCalls).toBe(0);
      // The refused input is not committed.
      expect(result.messages.some((m) => m.role === 'user' && m.content.includes('sk-'))).toBe(false);
    },
  },
  {
    id: 'output-guardrail',
    title: 'output guardrail: feedback makes the model answer again',
    prompt: 'Say something.',
    setup: () => {
      const probe = new Probe();
      return {
        probe,
        config: {
          model: counted(probe, scriptedModel([{ text: 'You idiot.' }, { text: 'Hello, friend.' }])),
          retry: false,
          guardrails: { output: [{ name: 'polite', check: ({ text }) => (/idiot/i.test(text) ? { type: 'feedback', message: 'Rephrase politely.' } : { type: 'pass' }) }] },
        },
      };
    },
    check: (result, probe) => {
      expect(result.outcome).toMatchObject({ type: 'Completed', finalText: 'Hello, friend.' });
      expect(result.messages.some((m) => m.role === 'user' && m.content.includes('Rephrase politely.'))).toBe(true);
      expect(probe.modelCalls).toBe(2);
    },
  },
  {
    id: 'tool-policy',
    title: 'tool policy: a denied call never runs, the model reads the reason',
    prompt: 'Clean up.',
    setup: () => {
      const probe = new Probe();
      const model = scriptedModel([{ toolCalls: [{ name: 'remove', args: { what: 'all' } }, { name: 'list', args: { what: 'files' } }] }, { text: 'Listed only.' }]);
      return {
        probe,
        config: {
          model,
          retry: false,
          tools: [recorded(probe, 'remove'), recorded(probe, 'list')],
          toolPolicy: ({ call }) => (call.name === 'remove' ? { type: 'deny', reason: 'removing is not allowed here' } : { type: 'allow' }),
        },
      };
    },
    check: (result, probe) => {
      expect(result.outcome).toMatchObject({ type: 'Completed', finalText: 'Listed only.' });
      expect(probe.ran).toEqual(['list:files']);
      expect(toolText(result)).toEqual(['remove=denied: removing is not allowed here', 'list=list done: files']);
    },
  },
  {
    id: 'approvals',
    title: 'approvals: one call approved runs once, one denied never runs',
    prompt: 'Send both.',
    setup: () => {
      const probe = new Probe();
      const model = scriptedModel([{ toolCalls: [{ name: 'send', args: { what: 'yes' } }, { name: 'send', args: { what: 'no' } }] }, { text: 'One sent.' }]);
      return { probe, config: { model, retry: false, tools: [recorded(probe, 'send', { needsApproval: true })] } };
    },
    answer: (wait) => {
      if (wait.kind !== 'approval') throw new Error(`unexpected wait ${wait.kind}`);
      return { approve: (wait.request.args as { what: string }).what === 'yes' };
    },
    check: (result, probe) => {
      expect(result.outcome).toMatchObject({ type: 'Completed', finalText: 'One sent.' });
      expect(probe.ran).toEqual(['send:yes']);
      expect(result.toolCalls.map((c) => [c.name, c.isError])).toEqual([
        ['send', false],
        ['send', true],
      ]);
    },
  },
  {
    id: 'in-doubt',
    title: "in doubt: a call cut off by a crash waits for a person; a hand result reaches the model, nothing runs twice",
    prompt: 'Charge it.',
    crash: true,
    setup: () => {
      const probe = new Probe();
      const model = scriptedModel([{ toolCalls: [{ id: 'c1', name: 'wait_here', args: {} }] }, (request) => ({ text: `Result: ${request.messages.at(-1)!.content}` })]);
      return { probe, config: { model, retry: false, tools: [latch(probe, { inDoubt: 'ask' })] } };
    },
    answer: (wait) => {
      if (wait.kind !== 'doubt') throw new Error(`unexpected wait ${wait.kind}`);
      return { doubt: { action: 'result', result: { charged: 500 } } };
    },
    check: (result, probe) => {
      expect(result.outcome).toMatchObject({ type: 'Completed', finalText: 'Result: {"charged":500}' });
      // The process that died ran it; the one that resumed did not.
      expect(probe.ran).toEqual([]);
    },
  },
  {
    id: 'budget-pause',
    title: 'budget pause and raise: past maxToolCalls the run waits; a raise continues the same run',
    prompt: 'Look twice.',
    setup: () => {
      const probe = new Probe();
      const model = scriptedModel([
        { toolCalls: [{ name: 'look', args: { what: 'one' } }] },
        { toolCalls: [{ name: 'look', args: { what: 'two' } }] },
        { text: 'Looked twice.' },
      ]);
      return { probe, config: { model, retry: false, tools: [recorded(probe, 'look')], budget: { maxToolCalls: 1, pause: true } } };
    },
    answer: (wait) => {
      if (wait.kind !== 'budget') throw new Error(`unexpected wait ${wait.kind}`);
      return { raise: { maxToolCalls: 5 } };
    },
    check: (result, probe) => {
      expect(result.outcome).toMatchObject({ type: 'Completed', finalText: 'Looked twice.' });
      expect(probe.ran).toEqual(['look:one', 'look:two']);
    },
  },
  {
    id: 'time-budget',
    title: 'time budget: a model call in flight that never answers is aborted at maxDurationMs',
    prompt: 'Think forever.',
    setup: () => {
      const probe = new Probe();
      const model: Model = {
        name: 'stuck',
        generate: ({ signal }) =>
          new Promise((_, reject) => {
            probe.modelCalls++;
            signal?.addEventListener('abort', () => reject(signal.reason ?? new Error('aborted')), { once: true });
          }),
      };
      return { probe, config: { model, retry: false, budget: { maxDurationMs: 150 } } };
    },
    check: (result, probe) => {
      expect(result.outcome.type).toBe('Sealed');
      expect(result.outcome.reason).toMatch(/^budget: \d+ ms elapsed, limit 150 ms/);
      expect(probe.modelCalls).toBe(1);
    },
  },
  {
    id: 'fallback',
    title: 'fallback: a 503 from the first model goes to the second, which the run keeps',
    prompt: 'Refunds?',
    setup: () => {
      const probe = new Probe();
      const overloaded = { error: { message: 'the provider returned HTTP 503: overloaded', status: 503 } };
      const primary = scriptedModel([overloaded, { text: 'never' }], { name: 'primary' });
      const backup = scriptedModel([{ toolCalls: [{ name: 'look', args: { what: 'policy' } }] }, { text: 'Five days.' }], { name: 'backup' });
      return { probe, config: { model: [primary, backup], retry: false, tools: [recorded(probe, 'look')] } };
    },
    check: (result) => {
      expect(result.outcome).toMatchObject({ type: 'Completed', finalText: 'Five days.' });
      if (result.events) expect(result.events.filter((e) => e.type === 'model.fallback')).toHaveLength(1);
    },
  },
  {
    id: 'repetition',
    title: 'repetition: the third identical batch is not run, the fourth seals the run',
    prompt: 'Search.',
    setup: () => {
      const probe = new Probe();
      const again = { toolCalls: [{ name: 'search', args: { what: 'x' } }] };
      return { probe, config: { model: scriptedModel([again, again, again, again, { text: 'never' }]), retry: false, tools: [recorded(probe, 'search')] } };
    },
    check: (result, probe) => {
      expect(result.outcome.type).toBe('Sealed');
      expect(result.outcome.reason).toMatch(/^repetition: /);
      expect(probe.ran).toEqual(['search:x', 'search:x']);
    },
  },
  {
    id: 'subagents',
    title: "subagents: a child agent's tool runs, its answer is the call's result",
    prompt: 'Ask the writer.',
    setup: () => {
      const probe = new Probe();
      const writer = createAgentMachine({
        model: scriptedModel([{ toolCalls: [{ id: 'p1', name: 'note', args: { what: 'tea at 4' } }] }, { text: 'Noted tea at 4.' }]),
        tools: [recorded(probe, 'note')],
        retry: false,
      });
      const model = scriptedModel([{ toolCalls: [{ id: 'c1', name: 'writer', args: { task: 'Note tea.' } }] }, (request) => ({ text: `Writer said: ${request.messages.at(-1)!.content}` })]);
      return { probe, config: { model, retry: false, tools: [agentTool({ agent: writer, name: 'writer', description: 'Writes notes.' })] } };
    },
    check: (result, probe) => {
      expect(result.outcome).toMatchObject({ type: 'Completed', finalText: 'Writer said: Noted tea at 4.' });
      expect(probe.ran).toEqual(['note:tea at 4']);
    },
  },
  {
    id: 'handoffs',
    title: 'handoffs: triage hands the conversation to billing, whose tool and model finish it',
    prompt: 'Refund order A-7.',
    setup: () => {
      const probe = new Probe();
      return {
        probe,
        config: {
          model: scriptedModel([{ toolCalls: [{ id: 't1', name: 'transfer_to_billing', args: {} }] }]),
          retry: false,
          handoffs: {
            name: 'triage',
            history: 'filtered',
            agents: [
              {
                name: 'billing',
                description: 'Refunds.',
                tools: [recorded(probe, 'refund')],
                model: scriptedModel([{ toolCalls: [{ id: 'r1', name: 'refund', args: { what: 'A-7' } }] }, { text: 'Refunded A-7.' }]),
              },
            ],
          },
        },
      };
    },
    check: (result, probe) => {
      expect(result.outcome).toMatchObject({ type: 'Completed', finalText: 'Refunded A-7.' });
      expect(probe.ran).toEqual(['refund:A-7']);
    },
  },
  {
    id: 'steering',
    title: 'steering: a message sent while a tool runs reaches the model at the next coherent point',
    prompt: 'Start.',
    during: { steer: 'Also mention the weather.' },
    setup: () => {
      const probe = new Probe();
      const model = scriptedModel([
        { toolCalls: [{ name: 'wait_here', args: {} }] },
        (request) => ({ text: `Saw: ${request.messages.filter((m) => m.role === 'user').map((m) => m.content).join(' / ')}` }),
      ]);
      return { probe, config: { model, retry: false, tools: [latch(probe)] } };
    },
    check: (result) => {
      expect(result.outcome).toMatchObject({ type: 'Completed', finalText: 'Saw: Start. / Also mention the weather.' });
      expect(toolText(result)).toEqual(['wait_here=waited']);
    },
  },
  {
    id: 'cancel',
    title: 'cancel: a run cancelled while a tool runs ends Cancelled, the call answered interrupted',
    prompt: 'Start.',
    during: 'cancel',
    setup: () => {
      const probe = new Probe();
      return { probe, config: { model: scriptedModel([{ toolCalls: [{ name: 'wait_here', args: {} }] }, { text: 'never' }]), retry: false, tools: [latch(probe)] } };
    },
    check: (result) => {
      expect(result.outcome.type).toBe('Cancelled');
      expect(result.toolCalls).toHaveLength(1);
      expect(result.toolCalls[0]).toMatchObject({ name: 'wait_here', isError: true });
      expect(result.toolCalls[0]!.content).toMatch(/interrupted/i);
    },
  },
  {
    id: 'compaction',
    title: 'compaction: a tool result that fills the window is summarized before the next call',
    prompt: 'Read the log.',
    setup: () => {
      const probe = new Probe();
      const big = defineTool({ name: 'read_log', description: 'Reads the log.', input: z.object({}), execute: () => words(700, 'line') });
      // Its result crosses the threshold while the log is no longer the newest turn: the log can be summarized.
      const look = defineTool({ name: 'look', description: 'Looks.', input: z.object({ what: z.string() }), execute: () => words(600, 'seen') });
      // Reads the log, looks once more, then answers.
      const model: Model = {
        name: 'm',
        async generate({ messages }) {
          probe.modelCalls++;
          if (messages.some((m) => m.role === 'system' && m.content.startsWith('Summarize'))) return { message: { role: 'assistant', content: 'The log was read.' }, finishReason: 'stop' };
          const last = messages.at(-1)!;
          // What a provider reports: the request's size, so the brain sees the window fill.
          const usage = { inputTokens: estimateTokens(messages), outputTokens: 1 };
          const call = (id: string, name: string, args: object) => ({ message: { role: 'assistant' as const, content: '', toolCalls: [{ id, name, args }] }, finishReason: 'tool-calls' as const, usage });
          if (last.role === 'user' && last.content === 'Read the log.') return call('r1', 'read_log', {});
          if (last.role === 'tool' && last.toolName === 'read_log') return call('l1', 'look', { what: 'errors' });
          return { message: { role: 'assistant', content: 'Nothing else in the log.' }, finishReason: 'stop', usage };
        },
      };
      return {
        probe,
        config: { model, retry: false, tools: [big, look], compactor: summarizingCompactor({ keepTokens: 10 }), policy: { contextWindow: 4_000, compactThreshold: 50 } },
      };
    },
    check: (result) => {
      expect(result.outcome).toMatchObject({ type: 'Completed', finalText: 'Nothing else in the log.' });
      // The tool result was summarized away: no message holds the log any more.
      expect(result.messages.some((m) => m.content.includes('line699'))).toBe(false);
      if (result.events) expect(result.events.some((e) => e.type === 'compaction.finished')).toBe(true);
    },
  },
  {
    id: 'operations',
    title: 'operations: a hook yields before tools; a resume with a valid payload continues the run',
    prompt: 'Ship it.',
    setup: () => {
      const probe = new Probe();
      const model = scriptedModel([{ toolCalls: [{ name: 'deploy', args: { what: 'main' } }] }, { text: 'Deployed.' }]);
      return { probe, config: { model, retry: false, tools: [recorded(probe, 'deploy')], operations: [ciGate] } };
    },
    answer: (wait) => {
      if (wait.kind !== 'operation') throw new Error(`unexpected wait ${wait.kind}`);
      return { resume: { operation: 'ci-gate', payload: { status: 'passed' } } };
    },
    check: (result, probe) => {
      expect(result.outcome).toMatchObject({ type: 'Completed', finalText: 'Deployed.' });
      expect(probe.ran).toEqual(['deploy:main']);
    },
  },
  {
    id: 'delivery',
    title: 'delivery: every event a client shows carries a delivery id, none twice',
    prompt: 'Go.',
    setup: () => {
      const probe = new Probe();
      const model = scriptedModel([{ text: 'Looking.', toolCalls: [{ name: 'look', args: { what: 'a' } }] }, { text: 'Found it.' }]);
      return { probe, config: { model, retry: false, tools: [recorded(probe, 'look')] } };
    },
    check: (result) => {
      expect(result.outcome).toMatchObject({ type: 'Completed', finalText: 'Found it.' });
      const shown = new Set(['run.started', 'text.delta', 'turn.finished', 'tool.started', 'tool.finished', 'run.finished']);
      const ids = result.events!.filter((e) => shown.has(e.type)).map((e) => e.id);
      expect(ids.length).toBeGreaterThanOrEqual(6);
      expect(ids.every((id) => typeof id === 'string' && id.startsWith('1/'))).toBe(true);
      expect(new Set(ids).size).toBe(ids.length);
    },
  },
];

export const scenarioById = new Map(SCENARIOS.map((scenario) => [scenario.id, scenario]));
