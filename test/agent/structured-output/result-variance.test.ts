/**
 * A structured result is a result: `RunAgentResult<{ city: string }>` (what `runAgent({ output })`
 * returns) is assignable to `RunAgentResult<unknown>`, so a helper typed `(r: RunAgentResult) => …`
 * takes it. The checks are types (`npm run typecheck` / `tsc --noEmit` reads this file); the
 * `@ts-expect-error` lines hold the other direction, which must stay an error.
 */
import { describe, expectTypeOf, it } from 'vitest';
import type { AgentOutcome, AgentStreamEvent, RunAgentResult } from '../../../src/index.js';

type City = { city: string };

describe('result and outcome types are covariant in their output', () => {
  it('a structured result, outcome and stream event are assignable to their unknown forms', () => {
    expectTypeOf<RunAgentResult<City>>().toExtend<RunAgentResult>();
    expectTypeOf<RunAgentResult<City>>().toExtend<RunAgentResult<unknown>>();
    expectTypeOf<AgentOutcome<City>>().toExtend<AgentOutcome>();
    expectTypeOf<AgentStreamEvent<City>>().toExtend<AgentStreamEvent>();
    // The issue's own case: a helper typed for any result takes a structured one.
    const outcomeType = (result: RunAgentResult): string => result.outcome.type;
    const structured = {} as RunAgentResult<City>;
    const widened: RunAgentResult<unknown> = structured;
    expectTypeOf(outcomeType).toBeCallableWith(structured);
    expectTypeOf(widened.output).toEqualTypeOf<unknown>();
  });

  it('the other direction stays an error, and a Completed outcome keeps its output required', () => {
    const loose = {} as RunAgentResult;
    // @ts-expect-error an unknown output is no { city: string }
    const narrowed: RunAgentResult<City> = loose;
    void narrowed;
    const outcome = {} as AgentOutcome<City>;
    if (outcome.type === 'Completed') expectTypeOf(outcome.output).toEqualTypeOf<City>();
    const plain = {} as AgentOutcome;
    if (plain.type === 'Completed') expectTypeOf(plain.output).toEqualTypeOf<unknown>();
  });
});
