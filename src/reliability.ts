/**
 * What loopchart checks where things enter it, beyond the errors the root entry exports: the rule
 * every model reply passes (`ModelReplySchema`, `parseModelReply`, `normalizeUsage`) and the
 * limits on what a provider or a tool may send. Re-exported by the root entry.
 */
export { MAX_REPORTED_TOKENS, ModelReplySchema, normalizeUsage, parseModelReply } from './model.js';
export { MAX_SSE_EVENT_LENGTH, MAX_SSE_LINE_LENGTH } from './models/sse.js';
export { DEFAULT_TOOL_TIMEOUT_MS } from './tools/run-tools.js';
