/**
 * The session ids the MCP server makes for itself: `mcp/<tool>/<caller tag>/<id>`, one served
 * tool's conversation with one caller. No other surface makes or continues one: a chat with such
 * an id would run the chat's agent in that conversation, and the MCP server would then continue
 * the chat as its own.
 */
export const MCP_SERVER_NAMESPACE = 'mcp/';

/** Whether `sessionId` is in the MCP server's own namespace (see `MCP_SERVER_NAMESPACE`). */
export const isMcpServerSessionId = (sessionId: string): boolean => sessionId.startsWith(MCP_SERVER_NAMESPACE);
