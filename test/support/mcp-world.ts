import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach } from 'vitest';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { startCountingService } from './counting-service';
import { requireEngine, requireTinyImage } from './docker-engine';
import { bundledCli, removeHostArtifacts } from './plan-fixture';

export interface McpConnection {
  client: Client;
  pid: number;
  stderr: () => string;
  close(): Promise<void>;
}

/**
 * `berth mcp` spawned by the MCP SDK's own stdio client, over berth/tiny with its own store and
 * host id; the sandbox may reach a loopback counting service (through the egress proxy), or nothing (`network: 'none'`).
 */
export async function mcpWorld(o: { snapshotPolicy?: 'never' | 'after-each-step' | 'on-demand'; network?: 'none' } = {}) {
  const docker = await requireEngine();
  const image = await requireTinyImage(docker);
  const service = await startCountingService();
  const port = new URL(service.url).port;
  const dir = mkdtempSync(join(tmpdir(), 'berth-mcp-'));
  mkdirSync(join(dir, 'ws'));
  writeFileSync(join(dir, 'ws', 'hello.txt'), 'hello from the host\n');
  const env = join(dir, 'env.yaml');
  writeFileSync(
    env,
    `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${image}" }\n` +
      `resources: { memoryMb: 256, commandTimeoutS: 600 }\nlease: { ttlS: 600, heartbeatS: 10 }\nsnapshot: { policy: ${o.snapshotPolicy ?? 'never'} }\n` +
      (o.network === 'none' ? 'network: { mode: none }\n' : `network: { mode: allowlist, allow: ["localhost:${port}"], allowOverride: ["localhost:${port}"] }\n`),
  );
  const hostId = `mcptest-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const store = join(dir, 'berth.db');
  const bin = await bundledCli();
  const open: McpConnection[] = [];
  const children: ChildProcess[] = [];
  /** Servers whose client was a child process: orphaned when it is killed, so ended here. */
  const servers: number[] = [];
  const tokenFile = join(dir, 'serve-token');
  const childEnv = { ...(process.env as Record<string, string>), BERTH_HOST_ID: hostId, BERTH_OPERATOR: 'tester' };
  return {
    dir,
    store,
    service,
    port,
    docker,
    hostId,
    /** Starts a server (`--env` for a new session, or `--session ID`) and connects a client to it; `env` adds to the server's environment (a fault point to arm). */
    async connect(args: string[], env: Record<string, string> = {}): Promise<McpConnection> {
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [bin, 'mcp', ...args, '--store', store],
        env: { ...childEnv, ...env },
        stderr: 'pipe',
      });
      let err = '';
      transport.stderr?.on('data', (d: Buffer) => (err += d.toString()));
      const client = new Client({ name: 'berth-test', version: '1.0.0' });
      await client.connect(transport);
      const c: McpConnection = { client, pid: transport.pid!, stderr: () => err, close: () => client.close() };
      open.push(c);
      return c;
    },
    /** Starts `berth mcp --http` on a free loopback port; resolves with its URL once it listens. `env` adds to the server's environment. */
    async startHttp(args: string[], env: Record<string, string> = {}): Promise<{ url: string; child: ChildProcess; token: () => string }> {
      const child = spawn(process.execPath, [bin, 'mcp', '--http', '--port', '0', '--token-file', tokenFile, ...args, '--store', store], { env: { ...childEnv, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
      children.push(child);
      let out = '';
      let err = '';
      child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
      const url = await new Promise<string>((resolve, reject) => {
        child.stdout!.on('data', (d: Buffer) => {
          out += d.toString();
          const m = /(http:\/\/\S+\/mcp)/.exec(out);
          if (m) resolve(m[1]!);
        });
        child.once('exit', (code) => reject(new Error(`berth mcp --http exited (${code}) before listening: ${err}`)));
      });
      return { url, child, token: () => readFileSync(tokenFile, 'utf8').trim() };
    },
    /** A client of a `berth mcp --http` server with this bearer token; `fetch` sees every HTTP exchange of its transport (when each POST is answered). */
    async connectHttp(url: string, token: string, o: { fetch?: FetchLike } = {}): Promise<Client> {
      const client = new Client({ name: 'berth-test', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } }, ...(o.fetch ? { fetch: o.fetch } : {}) }));
      open.push({ client, pid: 0, stderr: () => '', close: () => client.close() });
      return client;
    },
    /**
     * An MCP client in a child process of its own (test/support/mcp-client-child.mjs) that starts a
     * server with `args` and makes one call: the client a test SIGKILLs, leaving its server orphaned.
     */
    async spawnClient(args: string[], call: { name: string; arguments: Record<string, unknown> }): Promise<{ child: ChildProcess; serverPid: number; stderr: () => string }> {
      const script = join(import.meta.dirname, 'mcp-client-child.mjs');
      const child = spawn(process.execPath, [script, bin, store, JSON.stringify(args), JSON.stringify(call)], { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
      children.push(child);
      let out = '';
      let err = '';
      child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
      const serverPid = await new Promise<number>((resolve, reject) => {
        child.stdout!.on('data', (d: Buffer) => {
          out += d.toString();
          const m = /\{"serverPid":(\d+)\}/.exec(out);
          if (m) resolve(Number(m[1]));
        });
        child.once('exit', (code) => reject(new Error(`the client exited (${code}) before its server started: ${err}`)));
      });
      servers.push(serverPid);
      return { child, serverPid, stderr: () => err };
    },
    envArgs: () => ['--env', env, '--workspace', join(dir, 'ws')],
    async cleanup() {
      for (const c of open) await c.close().catch(() => {});
      for (const ch of children) if (ch.exitCode === null && ch.signalCode === null) ch.kill('SIGKILL');
      for (const pid of servers) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      await service.close();
      await removeHostArtifacts(docker, hostId, [store]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export type McpWorld = Awaited<ReturnType<typeof mcpWorld>>;

/** A tool result's text parts, joined. */
export const toolText = (r: CallToolResult): string => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');

/**
 * Called at a test file's top level: a function making the test's world, which is cleaned up after
 * each test (servers, containers, store), whatever the test's outcome.
 */
export function mcpWorldPerTest(): (o?: Parameters<typeof mcpWorld>[0]) => Promise<McpWorld> {
  let current: McpWorld | undefined;
  afterEach(async () => {
    await current?.cleanup();
    current = undefined;
  });
  return async (o) => (current = await mcpWorld(o));
}
