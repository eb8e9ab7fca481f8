/**
 * `loopchart/http`: loopchart sessions for AI SDK chat pages. `createChatHandler` is a Fetch API
 * handler (Next.js route handlers, Hono, Bun, Deno) that runs a durable session per chat and
 * answers with AI SDK UI message streams: approvals in the page, streams that survive a reload,
 * a second tab and a restarted server. `toNodeListener` mounts it on `node:http` or Express.
 */
export {
  createChatHandler,
  ChatHandlerOptionsError,
  type ChatHandler,
  type ChatHandlerOptions,
  type ChatHandlerSettings,
  type ChatErrorReporter,
} from './http/chat-handler.js';
export { toNodeListener } from './http/node.js';
export type { ChatAction } from './http/route.js';
export type { ChatAccessRequest, ChatAuthorization, ChatAuthorizer, ChatKeyMapper, ChatScopeMapper } from './http/chat-access.js';
export type { AiSdkVersion } from './http/ai-sdk-version.js';
export type { ChatMessageMetadata } from './http/ui-chunks.js';
export type { SubagentIncomplete } from './http/stored-subagents.js';
export type { LiveStats } from './viewer/sse.js';
