/**
 * The telemetry plumbing (src/telemetry/): the options an agent's `telemetry` takes, checked when
 * the machine is made, and the W3C trace context a session row stores so a run resumed in
 * another process continues its trace. The spans themselves: test/agent/tracing/.
 */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { createAgentMachine } from '../../machines/agent.machine.js';
import { InvalidConfigError } from '../../src/errors.js';
import { scriptedModel } from '../../src/models/scripted.js';
import { decodeRow, encodeRow, SessionRowError } from '../../src/sessions/session-row.js';
import { runToCompletion } from '../support/driver.js';

const answer = { text: 'It is 3.', usage: { inputTokens: 40, outputTokens: 4 } };

describe('telemetry options', () => {
  it.each([
    ['a tracer without startSpan', { tracer: {} }],
    ['recordContent that is not a boolean', { recordContent: 'yes' }],
    ['an empty name', { name: '' }],
    ['an unknown option', { sampleRate: 0.5 }],
  ])('%s is refused when the machine is made, with InvalidConfigError', (_, telemetry) => {
    expect(() => createAgentMachine({ model: scriptedModel([answer]), telemetry: telemetry as never })).toThrow(InvalidConfigError);
  });
});

describe('the stored trace context', () => {
  const TRACE = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

  it('round-trips through the session row; a row without one (older, or telemetry off) still reads', async () => {
    const actor = createActor(createAgentMachine({ model: scriptedModel([answer]), retry: false }), { input: { prompt: 'hi', sessionId: 'row' } });
    await runToCompletion(actor);
    const context = { ...actor.getSnapshot().context, trace: TRACE };
    const log = context.brain.context.history;
    expect(decodeRow('row', JSON.parse(JSON.stringify(encodeRow(context))), log).trace).toBe(TRACE);
    const { trace: _, ...without } = encodeRow(context);
    expect(decodeRow('row', without, log).trace).toBeUndefined();
  });

  it.each(['not-a-traceparent', '00-XYZ-b7ad6b7169203331-01', 42])('a malformed stored trace context (%s) is a SessionRowError, not a crash later', (trace) => {
    const actor = createActor(createAgentMachine({ model: scriptedModel([answer]), retry: false }), { input: { sessionId: 'row' } });
    const row = { ...encodeRow(actor.getSnapshot().context), trace };
    expect(() => decodeRow('row', row, [])).toThrow(SessionRowError);
  });
});
