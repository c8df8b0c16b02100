/**
 * Probe: the engine requests one MCP `exec` call makes, by the server's docker-modem debug log
 * (`DEBUG=modem`). `npx tsx bench/_mcp-engine-calls.ts ENV_YAML [CALLS]` (after `npm run build`;
 * `KEEP=1` keeps and names the log).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const env = process.argv[2]!;
const calls = Number(process.argv[3] ?? 3);
const dir = mkdtempSync(join(tmpdir(), 'mcp-calls-'));
const log = join(dir, 'modem.log');
const transport = new StdioClientTransport({
  command: 'sh',
  args: ['-c', `exec node host/cli/bin.mjs mcp --env ${env} --store ${join(dir, 'b.db')} 2>>${log}`],
  env: { ...(process.env as Record<string, string>), DEBUG: 'modem', DEBUG_DEPTH: '0' },
});
const client = new Client({ name: 'probe', version: '1' });
await client.connect(transport);
const exec = () => client.callTool({ name: 'exec', arguments: { command: 'true' } });
await exec();
await exec();
const lines = () => readFileSync(log, 'utf8').split('\n').filter((l) => /^\s*path: /.test(l) || /^\s*method: /.test(l));
const before = lines().length;
for (let i = 0; i < calls; i++) {
  const at = lines().length;
  await exec();
  const mine = lines().slice(at);
  console.log(`call ${i + 1}: ${mine.length / 2} engine requests`);
  for (const l of mine) console.log('   ', l.trim().slice(0, 160));
}
console.log(`per call: ${(lines().length - before) / calls / 2}`);
await client.close();
if (process.env.KEEP) console.log(log); else rmSync(dir, { recursive: true, force: true });
