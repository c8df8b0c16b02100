import { resolve } from 'node:path';
import { stat } from 'node:fs/promises';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { checkSupported, loadEnvironment, requireLocked } from '../../../environment';
import { Berth } from '../../api/berth';
import { BerthError } from '../../errors';
import { createMcpServer, McpSessions } from '../../mcp';
import type { CliContext } from '../context';
import { checkImageOnEngine } from './preflight';

export interface McpFlags {
  env?: string;
  workspace?: string;
  session?: string;
}

/**
 * `berth mcp [--env FILE [--workspace DIR]] [--session ID]`: an MCP server on stdio. Stdout is the
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
  const sessions = new McpSessions({ berth, environment, workspaceDir, sessionId: flags.session });
  if (flags.session) await sessions.requireSession(flags.session);
  const server = createMcpServer(berth, sessions);
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((done) => {
    transport.onclose = () => done();
    process.stdin.once('end', () => done());
  });
  await server.connect(transport);
  await closed;
  await server.close().catch(() => {});
  return 0;
}
