/**
 * `loopchart/mcp-server`: agents served as an MCP server, each agent a tool, over stdio
 * (`serveStdio`, what Claude Desktop, Cursor and VS Code start) or Streamable HTTP
 * (`createMcpHandler`), or any MCP transport (`createMcpServer`). Needs `@modelcontextprotocol/sdk`
 * installed next to loopchart; `import 'loopchart'` never loads it.
 */
export { McpServerOptionsError, type McpAgent } from './mcp-server/agents.js';
export { createMcpServer, SERVER_BUSY_CODE, type AgentMcpServer, type McpConnectOptions, type McpServerOptions, type McpServerSettings, type McpServerStats } from './mcp-server/server.js';
export { serveStdio, type StdioServeOptions, type StdioServing } from './mcp-server/stdio.js';
export { createMcpHandler, type McpAuthorize, type McpAuthorization, type McpHandler, type McpHandlerOptions } from './mcp-server/http.js';
export { OUTCOME_META, SESSION_ID_META } from './mcp-server/result.js';
