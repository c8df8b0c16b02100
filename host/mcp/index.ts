/** `berth mcp`: a Berth session as the sandbox of another agent, over the Model Context Protocol. */
export { createMcpServer, toMcpError } from './mcp-server';
export { McpSessions, type CallOutcome, type McpSessionOptions } from './mcp-session';
export { sandboxTools, SESSION_TOOLS } from './mcp-tools';
export { startMcpHttp, type McpHttpOptions } from './mcp-http';
export { LineStdioTransport, STDIO_MAX_MESSAGE_BYTES } from './stdio-transport';
