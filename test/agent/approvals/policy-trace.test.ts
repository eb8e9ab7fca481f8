/**
 * A tool policy's verdict is recorded in a durable session's trace with the policy that decided it
 * (issue 42, "say why"): the one that denied, else the first that asked for approval; an allow
 * names none (every policy allowed). The evals read a denial or a request for approval as a
 * decision with that rule, so a policy added since a recording is the first difference; the
 * viewer's step detail says who decided.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAgentMachine } from '../../../machines/agent.machine.js';
import type { ToolPolicy, ToolPolicyRequest, ToolPolicyVerdict } from '../../../src/agent/approvals/tool-policy.js';
import type { AgentConfig } from '../../../src/agent/core/config.js';
import { answerWaits } from '../../../src/agent/hosts/unattended.js';
import { decisionsOf, firstDifference } from '../../../src/evals/decisions.js';
import { scriptedModel } from '../../../src/models/scripted.js';
import { DurableSession } from '../../../src/sessions/durable-session.js';
import { readSessionTrace, type TraceEntry, type TraceEntryOf } from '../../../src/sessions/trace.js';
import { MemorySessionStore } from '../../../src/stores/memory.js';
import { defineTool } from '../../../src/tools/define-tool.js';
import { loadSessionView } from '../../../src/viewer/load.js';
import { rowsOf } from '../../../src/viewer/rows.js';

const tool = (name: string) => defineTool({ name, description: name, input: z.object({ path: z.string() }), execute: ({ path }) => `${name} ${path}` });
const tools = [tool('read_file'), tool('write_file'), tool('delete_file')];
const script = () =>
  scriptedModel([
    { toolCalls: [{ name: 'read_file', args: { path: 'a' } }, { name: 'delete_file', args: { path: '/etc' } }, { name: 'write_file', args: { path: 'b' } }] },
    { text: 'Done.' },
  ]);

// Named functions: the trace names a policy by its function's name; an anonymous one by its place.
const readOnlyHome: ToolPolicy = function readOnlyHome() {
  return { type: 'allow' };
};
const noDeletes: ToolPolicy = function noDeletes({ call }) {
  return call.name === 'delete_file' ? { type: 'deny', reason: 'deleting files is not allowed here' } : { type: 'allow' };
};
// Made in a list, so the function has no name.
const askForWrites = [({ call }: ToolPolicyRequest): ToolPolicyVerdict => (call.name === 'write_file' || call.name === 'delete_file' ? { type: 'needs-approval' } : { type: 'allow' })][0]!;

async function traceOf(config: AgentConfig, sessionId: string, store = new MemorySessionStore()): Promise<{ entries: TraceEntry[]; store: MemorySessionStore }> {
  const session = await DurableSession.open({ machine: createAgentMachine(config), store, sessionId });
  // The call that asks for approval is approved, so the run goes on to its end.
  const stop = answerWaits(session.actor, { approve: () => ({ approved: true }) });
  session.send({ type: 'input', message: 'Tidy up.' });
  await session.whenIdle();
  stop();
  await session.close();
  return { entries: (await readSessionTrace(store, sessionId)).flatMap((record) => ('entry' in record ? [record.entry] : [])), store };
}

const policies = (entries: TraceEntry[]) => entries.filter((entry): entry is TraceEntryOf<'policy'> => entry.type === 'policy');

describe("the tool policy's verdict in the trace", () => {
  it('each call has an entry with its verdict and the policy that decided it', async () => {
    const { entries } = await traceOf({ model: script(), tools, toolPolicy: [readOnlyHome, noDeletes, askForWrites] }, 's');
    expect(policies(entries).map(({ call, verdict, by }) => ({ call: call.name, verdict, by }))).toEqual([
      { call: 'read_file', verdict: { type: 'allow' }, by: undefined },
      // The deny of the second policy wins over the third's request for approval.
      { call: 'delete_file', verdict: { type: 'deny', reason: 'deleting files is not allowed here' }, by: 'noDeletes' },
      // An anonymous policy is named by its place in the list.
      { call: 'write_file', verdict: { type: 'needs-approval' }, by: '#3' },
    ]);
    // Recorded before the step that uses it, and before the approval it leads to.
    const kinds = entries.map((entry) => entry.type);
    expect(kinds.lastIndexOf('policy')).toBeLessThan(kinds.indexOf('approval.requested'));
  });

  it('the evals read a denial and a request for approval as decisions with their rule; a policy added since is the first difference', async () => {
    const { entries: before } = await traceOf({ model: script(), tools }, 'before');
    const { entries: after } = await traceOf({ model: script(), tools, toolPolicy: [readOnlyHome, noDeletes, askForWrites] }, 'after');
    const decisions = decisionsOf(after).filter((decision) => decision.kind === 'policy');
    expect(decisions.map(({ what, rule }) => ({ what, rule }))).toEqual([
      { what: 'tool policy on delete_file({"path":"/etc"}): deny (deleting files is not allowed here)', rule: "tool policy 'noDeletes'" },
      { what: 'tool policy on write_file({"path":"b"}): ask for approval', rule: "tool policy '#3'" },
    ]);
    // An allow is no decision of its own: a policy that allows everything changes nothing.
    const { entries: allowing } = await traceOf({ model: script(), tools, toolPolicy: readOnlyHome }, 'allowing');
    expect(firstDifference(decisionsOf(before), decisionsOf(allowing))).toBeNull();
    expect(firstDifference(decisionsOf(before), decisionsOf(after))).toMatchObject({ step: 3, got: { kind: 'policy', rule: "tool policy 'noDeletes'" } });
  });

  it("the viewer's step detail says which policy decided, or that every policy allowed", async () => {
    const { store } = await traceOf({ model: script(), tools, toolPolicy: [readOnlyHome, noDeletes, askForWrites] }, 'v');
    const view = (await loadSessionView(store, 'v'))!;
    const rows = rowsOf({ session: view }).rows.filter((row) => row.kind === 'policy');
    expect(rows.map((row) => row.title)).toEqual([
      'tool policy on read_file({"path":"a"}): allow',
      'tool policy on delete_file({"path":"/etc"}): deny: deleting files is not allowed here · by noDeletes',
      'tool policy on write_file({"path":"b"}): needs-approval · by #3',
    ]);
    expect(rows.map((row) => Object.fromEntries(row.detail().facts)['decided by'])).toEqual(['every tool policy allowed it', "tool policy 'noDeletes'", "tool policy '#3'"]);
    expect(rows.map((row) => row.error)).toEqual([false, true, false]);
  });
});
