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

/**
 * A batch asked for again and again: answered with a note instead of running (listeners see each
 * call start and finish); asked for once more after its note, the run is sealed, its calls
 * answered interrupted. One branch of the chart, its verdict read here.
 */
export function answerRepetition(agent: CompiledAgent, context: AgentContext, _event: AgentEvent): Effect[] {
  const verdict = repeated(agent, context);
  if (verdict.type === 'seal') return [{ assign: endRun(agent, context, { type: 'seal', reason: verdict.reason }) }];
  if (verdict.type === 'run') return [];
  const calls = pendingCalls(context.brain).map(({ call }) => call);
  const toolJournal = calls.map((call) => repetitionNote(call, verdict.times));
  return [
    { emit: { type: 'repetition.noted', turn: context.brain.context.turnsTaken, times: verdict.times, calls } },
    ...answeredCalls(context, calls.map((call, i) => ({ call, result: toolJournal[i] }))),
    { assign: { brain: applyToolResults({ ...context, toolJournal }, agent.maxCalls), ...resetBatch(agent, context) } },
  ];
}

/** An agent that watches for repeated batches (the default; `repetition: false` turns it off). */
const watchesRepetition = (agent: CompiledAgent) => agent.repetition !== null;

/** The guard and action the chart names for repetition. */
export const repetitionImplementations = {
  guards: {
    repeats: configured(watchesRepetition, ({ agent, context }) => repeated(agent, context).type !== 'run'),
  },
  actions: {
    answerRepetition: rule.effects(answerRepetition),
  },
};
