// An MCP client in its own process (one a test can SIGKILL): spawns `berth mcp` through the SDK's
// stdio client, prints `{"serverPid":N}`, makes the one tools/call given as JSON and prints its result.
// usage: node mcp-client-child.mjs BERTH_BIN STORE SERVER_ARGS_JSON CALL_JSON
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [bin, store, serverArgs, call] = process.argv.slice(2);
const transport = new StdioClientTransport({ command: process.execPath, args: [bin, 'mcp', ...JSON.parse(serverArgs), '--store', store], env: process.env, stderr: 'inherit' });
const client = new Client({ name: 'berth-test-child', version: '1.0.0' });
await client.connect(transport);
process.stdout.write(`${JSON.stringify({ serverPid: transport.pid })}\n`);
const result = await client.callTool(JSON.parse(call), undefined, { timeout: 600_000 });
process.stdout.write(`${JSON.stringify({ result })}\n`);
await client.close();
