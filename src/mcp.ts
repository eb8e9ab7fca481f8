/**
 * `loopchart/mcp`: the tools of an MCP server (stdio or Streamable HTTP) as loopchart tools.
 * Needs `@modelcontextprotocol/sdk` installed next to loopchart; `import 'loopchart'` never loads it.
 */
export {
  mcpTools,
  IDEMPOTENCY_KEY_META,
  McpServerSchema,
  McpToolsOptionsSchema,
  type McpServer,
  type McpTools,
  type McpToolsOptions,
} from './mcp/client.js';
export { McpResultTooLargeError, McpServerError, McpServerStartError, McpToolError } from './mcp/errors.js';
export { resultText } from './mcp/result-text.js';
