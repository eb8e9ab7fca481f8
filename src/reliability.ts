/**
 * What loopchart checks where things enter it, as public API: the reply rule every model reply
 * passes (`ModelReplySchema`, `parseModelReply`, `normalizeUsage`), the limits on what a
 * provider or a tool may send, and the errors those checks throw. Re-exported by the root entry.
 */
export { InvalidModelReplyError, MAX_REPORTED_TOKENS, ModelReplySchema, normalizeUsage, parseModelReply } from './model.js';
export { ModelDeadlineError } from './models/errors.js';
export { MAX_SSE_EVENT_LENGTH, MAX_SSE_LINE_LENGTH } from './models/sse.js';
export { InvalidSummaryError } from './compaction/summarize.js';
export { DEFAULT_TOOL_TIMEOUT_MS } from './tools/run-tools.js';
export { FileToolError, PathOutsideRootError } from './tools/errors.js';
