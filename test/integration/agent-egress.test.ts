import { execFileSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startModelServer } from '../support/model-server';
import { planFixture } from '../support/plan-fixture';

let cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c().catch(() => {});
  cleanup = [];
});

describe('an agent run in an allowlist sandbox', { timeout: 180_000 }, () => {
  it('is told what it may reach, reaches it through the proxy, is refused elsewhere, and every attempt and the override are on the run', async () => {
    const target: Server = createServer((req, res) => res.end(`hello ${req.url}`));
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', () => r()));
    cleanup.push(() => new Promise((r) => target.close(r)));
    const port = (target.address() as { port: number }).port;
    const fx = await planFixture([]);
    cleanup.push(() => fx.cleanup());
    const model = await startModelServer([
      { toolCalls: [{ name: 'exec', arguments: { command: `timeout 10 busybox wget -q -O - http://localhost:${port}/ok`, safe: true } }] },
      { toolCalls: [{ name: 'exec', arguments: { command: `timeout 10 busybox wget -q -O - http://example.invalid:${port}/ 2>&1`, safe: true } }] },
      { content: 'Fetched.' },
      { toolCalls: [{ name: 'exec', arguments: { command: `timeout 10 busybox wget -q -O - http://localhost:${port}/again`, safe: true } }] },
      { content: 'Fetched again.' },
    ]);
    cleanup.push(() => model.close());
    const envFile = join(fx.dir, 'env.yaml');
    writeFileSync(envFile, `${readFileSync(envFile, 'utf8')}network: { mode: allowlist, allow: ["localhost:${port}"], allowOverride: ["localhost:${port}"] }\n`);
    const end = await fx.cli(['agent', 'fetch the page', '--env', envFile, '--workspace', join(fx.dir, 'ws'), '--model', 'scripted-1', '--base-url', model.url, '--api-key-env', 'TEST_MODEL_KEY', '--json'], { TEST_MODEL_KEY: 'sk-test' });
    if (end.code !== 0) console.error(end.stderr.slice(-4000));
    expect(end.code, end.stderr).toBe(0);

    const exec = (model.requests[0]!.body as { tools: Array<{ function: { name: string; description: string } }> }).tools.find((t) => t.function.name === 'exec')!;
    expect(exec.function.description).toContain(`reaches only localhost:${port} (host:port), through the HTTP proxy`);
    const { results, attempts, overrides, lastSession } = await fx.read(async (s) => {
      const run = (await s.listRuns())[0]!;
      const entries = await s.listEntries(run.sessionId, { runId: run.id });
      return {
        results: entries.filter((e) => e.kind === 'agent.tool_result').map((e) => (e.body as { content: string }).content),
        attempts: entries.filter((e) => e.kind === 'egress.attempt').map((e) => `${(e.body as { decision: string }).decision} ${(e.body as { target: string }).target}`),
        overrides: entries.filter((e) => e.kind === 'egress.override').map((e) => e.body),
        lastSession: run.sessionId,
      };
    });
    expect(results[0]).toContain('hello /ok');
    expect(results[1]).toMatch(/403/);
    expect(attempts).toEqual([`allow localhost:${port}`, `deny example.invalid:${port}`]);
    expect(overrides).toEqual([{ mode: 'allowlist', allow: [`localhost:${port}`], risks: [expect.objectContaining({ pattern: `localhost:${port}`, kind: 'host-address', why: expect.stringContaining('resolves to 127.0.0.1') })] }]);
    // The session's sandbox waits for `berth chat` on its closed network; the proxy left with the command.
    expect((await fx.docker.listNetworks({ filters: { label: [`berth.host=${fx.hostId}`] } })).map((n) => n.Labels?.['berth.session'])).toEqual([lastSession]);
    expect(execFileSync('iptables', ['-w', '-S', 'INPUT'], { encoding: 'utf8' })).toContain(`berth:${fx.hostId}:`);

    // The next run of the session gets the proxy back, and its attempts are on that run.
    const chat = await fx.cli(['chat', lastSession, 'again', '--model', 'scripted-1', '--base-url', model.url, '--api-key-env', 'TEST_MODEL_KEY', '--json'], { TEST_MODEL_KEY: 'sk-test' });
    expect(chat.code, chat.stderr).toBe(0);
    const second = await fx.read(async (s) => {
      const run = (await s.listRuns()).at(-1)!;
      const entries = await s.listEntries(run.sessionId, { runId: run.id });
      return entries.filter((e) => e.kind === 'egress.attempt').map((e) => `${(e.body as { decision: string }).decision} ${(e.body as { target: string }).target}`);
    });
    expect(second).toEqual([`allow localhost:${port}`]);
  });
});
