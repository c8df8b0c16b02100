import { dirname, join, resolve } from 'node:path';
import { stat } from 'node:fs/promises';
import { checkSupported, loadEnvironment, requireLocked } from '../../../environment';
import { Berth } from '../../api/berth';
import { BerthError } from '../../errors';
// The modules themselves, not host/mcp's index: it names mcp-http, which the bundle would then load with them.
import { createMcpServer } from '../../mcp/mcp-server';
import { McpSessions } from '../../mcp/mcp-session';
import { LineStdioTransport } from '../../mcp/stdio-transport';
import type { CliContext } from '../context';
import { checkImageOnEngine } from './preflight';
import { portFlag } from '../port-flag';

export interface McpFlags {
  env?: string;
  workspace?: string;
  session?: string;
  'require-approval'?: string;
  http?: boolean;
  port?: string;
  host?: string;
  'token-file'?: string;
  'no-token'?: boolean;
}

/**
 * `berth mcp [--env FILE [--workspace DIR] [--require-approval exec,...]] [--session ID] [--http [--port P] [--host H] [--token-file F | --no-token]]`:
 * an MCP server on stdio, or on Streamable HTTP with `berth serve`'s token (and token file). Stdout is the
 * protocol's; logs go to stderr. It ends when the client closes stdin; the session and its
 * sandbox stay, so a server started again (here or on another host of a shared store) continues it.
 */
export async function mcpCommand(ctx: CliContext, flags: McpFlags): Promise<number> {
  let environment;
  if (flags.env) {
    environment = await loadEnvironment(resolve(flags.env));
    checkSupported(environment);
    requireLocked(environment);
    await checkImageOnEngine(ctx.docker, environment, resolve(flags.env));
  }
  const workspaceDir = flags.workspace ? resolve(flags.workspace) : null;
  if (workspaceDir && !(await stat(workspaceDir).catch(() => null))?.isDirectory()) throw new BerthError('usage', `--workspace ${flags.workspace} is not a directory`);
  const berth = Berth.from(ctx);
  const requireApproval = (flags['require-approval'] ?? '').split(',').map((t) => t.trim()).filter(Boolean);
  const sessions = new McpSessions({ berth, environment, workspaceDir, sessionId: flags.session, requireApproval });
  if (flags.session) await sessions.requireSession(flags.session);
  if (flags.http) return serveHttp(ctx, berth, sessions, flags);
  // After the HTTP branch: a refused --port there returned while the early start's sweep still used
  // the store it then closed ("egress sweep failed (The database connection is not open)").
  sessions.startEarly();
  const server = createMcpServer(berth, sessions);
  const transport = new LineStdioTransport();
  const closed = new Promise<void>((done) => {
    transport.onclose = () => done();
    process.stdin.once('end', () => done());
  });
  // Stdout is the protocol's: a message refused (too large, not JSON-RPC) is said on stderr too.
  transport.onerror = (err) => process.stderr.write(`berth mcp: ${err.message}\n`);
  await server.connect(transport);
  await closed;
  await server.close().catch(() => {});
  await sessions.close();
  return 0;
}

async function serveHttp(ctx: CliContext, berth: Berth, sessions: McpSessions, flags: McpFlags): Promise<number> {
  // Loaded here, not with the command: the SDK's HTTP transport and the web server's token code
  // (hono under it) are ~25 ms of a stdio server's start, which a client reconnecting waits for.
  const [{ startMcpHttp }, { isLoopback, loadOrCreateToken }] = await Promise.all([import('../../mcp/mcp-http'), import('../../serve')]);
  const host = flags.host ?? '127.0.0.1';
  if (flags['no-token'] && !isLoopback(host)) throw new BerthError('serve_needs_token', `refusing to serve ${host} without a token: only loopback addresses may go without one (drop --no-token)`);
  const tokenFile = flags['token-file'] ?? join(dirname(ctx.store.location), 'serve-token');
  const access = flags['no-token'] ? null : loadOrCreateToken(tokenFile);
  const server = await startMcpHttp(berth, sessions, { host, port: portFlag(flags.port, 7778), token: access?.token ?? null });
  process.stdout.write(`berth mcp: ${server.url} (store ${ctx.store.location}${access ? `; bearer token in ${tokenFile}` : '; no token'})\n`);
  await new Promise<void>((done) => {
    process.once('SIGINT', done);
    process.once('SIGTERM', done);
  });
  await server.close();
  await sessions.close();
  return 0;
}
