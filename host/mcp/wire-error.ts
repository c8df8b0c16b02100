import { McpError } from '@modelcontextprotocol/sdk/types.js';

/**
 * An `McpError` whose message on the wire is the text alone. The SDK's `McpError` writes
 * `MCP error CODE: ` into its own message, the server sends that message as the error's, and the
 * client's `McpError` adds the prefix again: clients read `MCP error -32602: MCP error -32602:
 * session_not_found: ...`. The code travels in the error's `code` field anyway.
 */
export class WireError extends McpError {
  constructor(code: number, message: string, data?: unknown) {
    super(code, message, data);
    this.message = message;
  }
}
