import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { AgentOutput } from '../agent/protocol/actor-types.js';
import type { ServedAgent } from './agents.js';
import type { CallEnd } from './call.js';

/** The `_meta` keys of a call's result: the session it ran in (pass it back to continue) and how its run ended. */
export const SESSION_ID_META = 'loopchart/sessionId';
export const OUTCOME_META = 'loopchart/outcome';

const errorResult = (text: string, meta: Record<string, unknown>): CallToolResult => ({ content: [{ type: 'text', text }], isError: true, _meta: meta });

/**
 * A call's end as the tool's result: a Completed run's final text, or its answer as JSON text and
 * as `structuredContent` when the tool has an output schema (checked against it first). Any other
 * end is a result with `isError` saying how the run ended: a tool error the calling model reads,
 * not a protocol error.
 */
export function callResult(served: ServedAgent, sessionId: string, end: CallEnd, timeoutMs: number): CallToolResult {
  if (end.type === 'left') return errorResult('the client left; the run is kept in its session', { [SESSION_ID_META]: sessionId });
  if (end.type === 'timeout') return errorResult(`the agent's run took longer than ${timeoutMs} ms and was cancelled`, { [SESSION_ID_META]: sessionId, [OUTCOME_META]: 'Cancelled' });
  return outputResult(served, sessionId, end.output);
}

/**
 * A repeat that waited its whole timeout for the call that runs its idempotency key: that run
 * goes on (the first call's own timeout bounds it), and a later repeat attaches to it again.
 */
export function stillRunningResult(sessionId: string, timeoutMs: number): CallToolResult {
  return errorResult(`the first call with this idempotency key still runs after ${timeoutMs} ms; repeat the call later for its outcome`, { [SESSION_ID_META]: sessionId });
}

function outputResult(served: ServedAgent, sessionId: string, output: AgentOutput | null): CallToolResult {
  const outcome = output?.outcome;
  const meta = { [SESSION_ID_META]: sessionId, [OUTCOME_META]: outcome?.type ?? 'None' };
  if (!outcome) return errorResult('the agent ended without an outcome', meta);
  if (outcome.type !== 'Completed') {
    const why = outcome.type === 'Failed' ? `: ${outcome.error.type}: ${outcome.error.message}` : outcome.type === 'Sealed' ? `: ${outcome.reason}` : '';
    return errorResult(`the agent's run ended ${outcome.type}${why}`, meta);
  }
  const structured = (outcome as { output?: unknown }).output;
  if (!served.output) {
    const text = structured !== undefined ? JSON.stringify(structured) : outcome.finalText;
    return { content: [{ type: 'text', text }], _meta: meta };
  }
  let value = structured;
  if (value === undefined) {
    try {
      value = JSON.parse(outcome.finalText);
    } catch {
      return errorResult(`the agent answered text that is not JSON, and the tool '${served.name}' has an output schema`, meta);
    }
  }
  const parsed = served.output.safeParse(value);
  if (!parsed.success) return errorResult(`the agent answered a result its output schema refuses: ${z.prettifyError(parsed.error)}`, meta);
  return { content: [{ type: 'text', text: JSON.stringify(parsed.data) }], structuredContent: parsed.data as Record<string, unknown>, _meta: meta };
}
