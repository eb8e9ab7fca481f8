/**
 * Repetition in the driver: the chart's guards and actions for a batch the model asks for again
 * and again (agent.repetition): noted instead of run, then sealed; with the rule they read over
 * the compiled agent and the run's context (the verdict itself: repetition.ts).
 */
import { configured, rule } from '../core/bind.js';
import { pendingCalls } from '../core/brain-state.js';
import type { CompiledAgent } from '../core/compile.js';
import type { AgentContext } from '../core/context.js';
import { endRun, resetBatch } from '../core/driver-rules.js';
import { answeredCalls, type Effect } from '../core/effects.js';
import { applyToolResults } from '../core/run-rules.js';
import { logOf } from '../../brain/message-log.js';
import type { AgentEvent } from '../protocol/agent-event.js';
import { repetitionNote, repetitionVerdict, type RepetitionVerdict } from './repetition.js';

/** The agent.repetition verdict on the batch the brain is about to run (see repetition.ts). */
export const repeated = (agent: CompiledAgent, context: AgentContext): RepetitionVerdict =>
  repetitionVerdict(logOf(context.brain.context), context.brain.value === 'AwaitingTools' ? agent.repetition : null);

/** The batch is answered with a note instead of running; listeners see each call start and finish. */
export function noteRepetition(agent: CompiledAgent, context: AgentContext, _event: AgentEvent): Effect[] {
  const out: Effect[] = [];
  const times = (repeated(agent, context) as Extract<RepetitionVerdict, { type: 'note' }>).times;
  const calls = pendingCalls(context.brain).map(({ call }) => call);
  const toolJournal = calls.map((call) => repetitionNote(call, times));
  out.push({ emit: { type: 'repetition.noted', turn: context.brain.context.turnsTaken, times, calls } });
  out.push(...answeredCalls(context, calls.map((call, i) => ({ call, result: toolJournal[i] }))));
  out.push({ assign: { brain: applyToolResults({ ...context, toolJournal }, agent.maxCalls), ...resetBatch(agent, context) } });
  return out;
}

/** The same batch again after its note: the run is sealed, its calls answered interrupted. */
export function sealRepetition(agent: CompiledAgent, context: AgentContext, _event: AgentEvent): Partial<AgentContext> {
  return endRun(agent, context, { type: 'seal', reason: (repeated(agent, context) as Extract<RepetitionVerdict, { type: 'seal' }>).reason });
}

/** An agent that watches for repeated batches (the default; `repetition: false` turns it off). */
const watchesRepetition = (agent: CompiledAgent) => agent.repetition !== null;

/** The guards and actions the chart names for repetition. */
export const repetitionImplementations = {
  guards: {
    repetitionNoted: configured(watchesRepetition, ({ agent, context }) => repeated(agent, context).type === 'note'),
    repetitionSeals: configured(watchesRepetition, ({ agent, context }) => repeated(agent, context).type === 'seal'),
  },
  actions: {
    noteRepetition: rule.effects(noteRepetition),
    sealRepetition: rule.assign(sealRepetition),
  },
};
