import type { Executor, SideEffect, SideEffectKind, SideEffectOutputs } from '../agent/protocol/executor.js';
import { EvalCaseError } from './errors.js';
import { RecordedWorld, unrecordedResult, type ToolSourceKind } from './recorded.js';

/*
 * The executor a case runs through. Tools are always quarantined: answered from the recording
 * (or the case's `toolResults`), a call with no answer given an `unrecorded call` result, only
 * live tools run. In a dry run every other effect that could reach outside is answered from the
 * recording too: the model, a compaction (a summarizing compactor calls a model), a guardrail (it
 * may call one). The agent's own rules run, as they are the decisions under test: its tool
 * policies, its approval rules, an in-doubt start marker (in-process, no outside call). A tool
 * source listing and an operation hook are never in a recording: they run as they are (the
 * listing says which tools the run offers, its calls are still answered from the recording; a
 * hook is the agent's own code), as a dry run always did, and the guide says so.
 */

/** Effects a dry run runs as they are: the agent's own rules and code, and what no recording holds. */
const RUN_AS_THEY_ARE: ReadonlySet<SideEffectKind> = new Set(['policy', 'approval', 'toolStart', 'toolset', 'operation']);

export interface QuarantineOptions {
  caseId: string;
  world: RecordedWorld;
  mode: 'live' | 'recorded';
  liveTools: ReadonlySet<string>;
  /** The agent's own executor, which live effects go through. */
  inner: Executor;
  /** The 0-based index of the case's run in flight. */
  run: () => number;
}

export interface Quarantine {
  executor: Executor;
  /** Where each tool call's result came from, by call id. */
  sources: ReadonlyMap<string, ToolSourceKind>;
}

/**
 * The quarantining executor of one case's run. In a dry run a compaction or guardrail the
 * recording lacks fails the run with an `EvalCaseError` (problem `unrecorded`) naming it, as an
 * unrecorded model turn fails it with a `ModelError`: the decisions up to there still diff.
 */
export function quarantine(options: QuarantineOptions): Quarantine {
  const { caseId, world, mode, liveTools, inner, run } = options;
  const sources = new Map<string, ToolSourceKind>();
  const unrecorded = (what: string) => new EvalCaseError(caseId, 'unrecorded', `unrecorded ${what}: a dry run calls nothing, and the recording has no answer for it`);
  const executor: Executor = async <K extends SideEffectKind>(effect: SideEffect<K>, perform: () => Promise<SideEffectOutputs[K]>): Promise<SideEffectOutputs[K]> => {
    if (effect.kind === 'tool') {
      const { call, turn } = (effect as SideEffect<'tool'>).input;
      if (liveTools.has(call.name)) {
        sources.set(call.id, 'live');
        return inner(effect, perform);
      }
      const recorded = world.toolResult(call, run(), turn);
      sources.set(call.id, recorded ? 'recorded' : 'unrecorded');
      return (recorded ?? unrecordedResult(call)) as SideEffectOutputs[K];
    }
    if (mode === 'live' || RUN_AS_THEY_ARE.has(effect.kind)) return inner(effect, perform);
    switch (effect.kind) {
      case 'model':
        return world.reply(run(), (effect as SideEffect<'model'>).input.turn, (effect as SideEffect<'model'>).input.model) as SideEffectOutputs[K];
      case 'compaction': {
        const { input } = effect as SideEffect<'compaction'>;
        const answer = world.compaction(run(), input);
        if (!answer) throw unrecorded(`compaction (run ${run() + 1}, turn ${input.turn}, ${input.reason})`);
        return answer as SideEffectOutputs[K];
      }
      case 'guardrail': {
        const { input } = effect as SideEffect<'guardrail'>;
        const answer = world.guardrail(run(), input);
        if (!answer) throw unrecorded(`guardrail '${input.guardrail}' (${input.stage}, run ${run() + 1}, turn ${input.turn})`);
        return answer as SideEffectOutputs[K];
      }
      default:
        return inner(effect, perform);
    }
  };
  return { executor, sources };
}
