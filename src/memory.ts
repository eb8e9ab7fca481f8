/**
 * `loopchart/memory`: memory that outlives a session, kept per scope (a user, a resource, a team)
 * beside the sessions of a store: working memory the agent reads and rewrites, recall of the
 * scope's earlier sessions, and the privacy controls (list, export, delete).
 */
export { agentMemory, DEFAULT_EMBED_TIMEOUT_MS, DEFAULT_RECALL_IN_PROMPT, DEFAULT_WORKING_MAX_CHARS, type AgentMemory, type AgentMemoryOptions, type MemoryState } from './memory/agent-memory.js';
export { deleteScope, exportScope, listScopes } from './memory/privacy.js';
export { InvalidScopeError, MemoryEmbedError, MemoryTooLargeError } from './memory/errors.js';
export type { Embed } from './memory/recall.js';
export type { MemoryEntry, MemoryHit, ScopeExport, ScopeSummary, WorkingDoc } from './memory/memory-backend.js';
