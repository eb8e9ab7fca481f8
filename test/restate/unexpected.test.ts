/**
 * A turn that failed unexpectedly past its bounded retries ends the run in flight `Failed`
 * (issue 25 item 8): the stored context takes the next input as a new run. (The retries and the
 * client's TurnFailed error against a real Restate server: test/distributed/session-object.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { createActor, waitFor } from 'xstate';
import { z } from 'zod';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { runInFlight } from '../../src/agent/protocol/actor-types.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { failedRun, UNEXPECTED_ERROR_TYPE } from '../../src/restate/unexpected.js';
import { decodeRow, encodeRow } from '../../src/sessions/session-row.js';
import { defineTool } from '../../src/tools/define-tool.js';
import { runFinished, WAIT_MS } from '../support/driver.js';
import { AWAITING_APPROVAL } from '../support/hitl.js';

const deploy = defineTool({ name: 'deploy', description: 'Needs a human', input: z.object({}), needsApproval: true, execute: () => 'deployed' });
const machine = () =>
  createAgentMachine({
    // The failed run's messages are discarded, so both runs read the script's first reply.
    model: scriptedModel([(request) => (request.messages.at(-1)?.content === 'deploy it' ? { toolCalls: [{ name: 'deploy', args: {} }] } : { text: 'next run answered' })]),
    tools: [deploy],
    retry: false,
  });

describe('failedRun', () => {
  it('ends a run waiting for an approval Failed with TurnFailed; the session then runs the next input', async () => {
    const actor = createActor(machine(), { input: { sessionId: 'f-1' } }).start();
    actor.send({ type: 'input', message: 'deploy it' });
    await waitFor(actor, (s) => s.matches(AWAITING_APPROVAL), { timeout: WAIT_MS });
    const context = actor.getSnapshot().context;
    actor.stop();
    expect(runInFlight(context.brain)).toBe(true);

    const failed = failedRun(context, 'the turn failed 4 times: Error: boom');
    expect(runInFlight(failed.brain)).toBe(false);
    expect(failed.approvals.waiting).toEqual([]);
    expect(failed.lastRun?.outcome).toEqual({ type: 'Failed', error: { type: UNEXPECTED_ERROR_TYPE, message: 'the turn failed 4 times: Error: boom' } });

    // Stored and read back as the K/V does, then the next input.
    const log = failed.brain.context.history.concat(failed.brain.context.pending);
    const stored = decodeRow('f-1', JSON.parse(JSON.stringify(encodeRow(failed))), log);
    const next = createActor(machine(), { input: { stored } }).start();
    next.send({ type: 'input', message: 'and now?' });
    await runFinished(next, 2);
    expect(next.getSnapshot().context.lastRun?.outcome).toEqual({ type: 'Completed', finalText: 'next run answered' });
    next.stop();
  });

  it('leaves a context with no run in flight as it is', async () => {
    const actor = createActor(machine(), { input: { sessionId: 'f-2' } }).start();
    const context = actor.getSnapshot().context;
    actor.stop();
    expect(failedRun(context, 'x')).toBe(context);
  });
});
