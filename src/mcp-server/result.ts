import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { AgentOutput } from '../agent/protocol/actor-types.js';
import type { ServedAgent } from './agents.js';
import type { CallEnd } from './call.js';

/** The `_meta` keys of a call's result: the session it ran in (pass it back to continue) and how its run ended. */
export const SESSION_ID_META = 'loopchart/sessionId';
export const OUTCOME_META = 'loopchart/outcome';

const errorResult = (text: string, meta: Record<string, unknown>): CallToolResult => ({ content: [{ type: 'text', text }], isError: true, _meta: meta });

/** What bounds a result: the call's timeout (to say it), the longest text sent. */
interface ResultLimits {
  callTimeoutMs: number;
  maxResultChars: number;
}

/**
 * `text` as sent: at most `max` of its characters, then a marker saying it was cut and how long it
 * was, so neither the client nor the model reading it takes the part for the whole. Never cut
 * inside a surrogate pair.
 */
function boundedText(text: string, max: number): string {
  if (text.length <= max) return text;
  const end = /[\ud800-\udbff]/.test(text.charAt(max - 1)) ? max - 1 : max;
  return `${text.slice(0, end)}\n\n[… cut by the MCP server: the text is ${text.length} characters, the first ${end} are sent (maxResultChars)]`;
}

/**
 * A call's end as the tool's result: a Completed run's final text, or its answer as JSON text and
 * as `structuredContent` when the tool has an output schema (checked against it first). Any other
 * end is a result with `isError` saying how the run ended: a tool error the calling model reads,
 * not a protocol error. A text over `maxResultChars` is cut with a marker; a structured answer
 * over it (JSON that cannot be cut) is an error result saying so: the whole answer stays in the session.
 */
export function callResult(served: ServedAgent, sessionId: string, end: CallEnd, limits: ResultLimits): CallToolResult {
  if (end.type === 'left') return errorResult('the client left; the run is kept in its session', { [SESSION_ID_META]: sessionId });
  if (end.type === 'timeout') return errorResult(`the agent's run took longer than ${limits.callTimeoutMs} ms and was cancelled`, { [SESSION_ID_META]: sessionId, [OUTCOME_META]: 'Cancelled' });
  const result = outputResult(served, sessionId, end.output);
  const [content] = result.content as [{ type: 'text'; text: string }];
  if (content.text.length <= limits.maxResultChars) return result;
  if (result.structuredContent !== undefined) {
    const why = `the agent's structured answer is ${content.text.length} characters of JSON, over the server's maxResultChars of ${limits.maxResultChars}; it is kept in the session`;
    return errorResult(why, result._meta as Record<string, unknown>);
  }
  return { ...result, content: [{ type: 'text', text: boundedText(content.text, limits.maxResultChars) }] };
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
