/**
 * A CI-gate operation: when the model asks to `deploy`, the run yields (`awaiting: 'ci-result'`)
 * before any tool runs, and resumes when the CI system sends
 * `{ type: 'operation.resume', operation: 'ci-gate', payload: { status, url } }`. The payload is
 * checked against the gate's schema (a bad one is refused, the run keeps waiting); the result is
 * kept in the gate's state and told to the model from then on.
 */
import { z } from 'zod';
import type { Operation } from '../../src/agent/operations/operation.js';

export const CiResult = z.object({ status: z.enum(['passed', 'failed']), url: z.string().url().optional() });
export type CiResult = z.infer<typeof CiResult>;

const GateState = z.object({ results: z.array(CiResult) });

export function ciGateOperation(options: { gatedTools?: readonly string[] } = {}): Operation<z.infer<typeof GateState>, CiResult> {
  const gated = new Set(options.gatedTools ?? ['deploy']);
  return {
    name: 'ci-gate',
    state: { schema: GateState, initial: { results: [] } },
    resume: {
      schema: CiResult,
      apply: (result, ctx) => ({ state: { results: [...ctx.state.results, result] } }),
    },
    beforeTools(calls) {
      const waitingFor = calls.filter(({ call }) => gated.has(call.name)).map(({ call }) => call.id);
      if (waitingFor.length > 0) return { yield: { reason: 'ci-result', payload: { calls: waitingFor } } };
    },
    prompt: (ctx) => {
      const last = ctx.state.results.at(-1);
      return last && `The last CI run ${last.status}${last.url ? ` (${last.url})` : ''}.`;
    },
  };
}
