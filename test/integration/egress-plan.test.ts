import { createServer, type Server } from 'node:http';
import { readFileSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { networkInterfaces } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { unrecordedSnapshotImages } from '../support/leak-check';
import { planFixture } from '../support/plan-fixture';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
let target: Server | undefined;
afterEach(async () => {
  await new Promise((r) => (target ? target.close(r) : r(undefined)));
  await fx?.cleanup();
  fx = undefined;
  target = undefined;
});

/** The test's outside target: answers `hello <path>`; closed after each test. */
async function serveTarget(host: string): Promise<number> {
  target = createServer((req, res) => res.end(`hello ${req.url}`));
  await new Promise<void>((r) => target!.listen(0, host, () => r()));
  return (target.address() as { port: number }).port;
}

/** Released runs leave no sandbox network and no INPUT rule of their host behind. */
async function expectNothingLeft(f: NonNullable<typeof fx>): Promise<void> {
  expect(await f.docker.listNetworks({ filters: { label: [`berth.host=${f.hostId}`] } })).toEqual([]);
  expect(execFileSync('iptables', ['-w', '-S'], { encoding: 'utf8' })).not.toContain(`berth:${f.hostId}:`);
}

describe('network.mode allowlist in a plan run', { timeout: 180_000 }, () => {
  it('reaches an allowed target through the host proxy, is refused elsewhere, audits both and leaves nothing behind', async () => {
    const port = await serveTarget('127.0.0.1');
    const steps = [
      { name: 'allowed', run: `timeout 10 busybox wget -q -O - http://localhost:${port}/ok` },
      { name: 'denied', run: `timeout 10 busybox wget -q -O - http://example.invalid:${port}/ 2>&1; echo "exit=$?"` },
      // Another port on the gateway gets no answer at all (egress-isolation.test.ts shows it with a listening service).
      // Direct TCP to three blocked destinations, one of them twice, side by side.
      { name: 'direct', run: `gw=$(echo "$http_proxy" | sed 's|http://||; s|:.*||'); for p in 22 80 80 5432; do (if timeout 5 busybox nc -w 3 "$gw" $p </dev/null; then echo reached; else echo blocked; fi) & done; wait` },
    ];
    fx = await planFixture(steps);
    const envFile = `${fx.dir}/env.yaml`;
    // localhost is a local name: allowed only with the explicit override, which the run records.
    writeFileSync(envFile, `${readFileSync(envFile, 'utf8')}network: { mode: allowlist, allow: ["localhost:${port}"], allowOverride: ["localhost:${port}"] }\n`);
    const end = await fx.cli(['run', fx.plan]);
    expect(end.code, end.stderr).toBe(0);
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const { outputs, audit, overrides, attempts } = await fx.read(async (s) => {
      const run = (await s.getRun(runId))!;
      const entries = await s.listEntries(run.sessionId);
      return {
        outputs: entries.filter((e) => e.kind === 'plan.step.output').map((e) => (e.body as { stdoutTail: string }).stdoutTail),
        overrides: entries.filter((e) => e.kind === 'egress.override'),
        attempts: entries.filter((e) => e.kind === 'egress.attempt').map((e) => ({ runId: e.runId, ...(e.body as object) })),
        audit: await s.listEgress({ runId }),
      };
    });
    expect(outputs[0]).toBe('hello /ok');
    expect(outputs[1]).toMatch(/403[\s\S]*exit=1/);
    expect(outputs[2]).toBe('blocked\nblocked\nblocked\nblocked\n');
    expect(audit.filter((a) => a.method !== 'TCP').map((a) => [a.method, a.target, a.decision])).toEqual([
      ['GET', `localhost:${port}`, 'allow'],
      ['GET', `example.invalid:${port}`, 'deny'],
    ]);
    // The direct attempts, dropped by the sandbox's rules and read back from the kernel log, counted
    // per destination and port (a row per recording window, so summed here).
    const dropped = audit.filter((a) => a.method === 'TCP');
    const gw = dropped[0]?.target.split(':')[0];
    const counts: Record<string, number> = {};
    for (const a of dropped) counts[a.target] = (counts[a.target] ?? 0) + a.count;
    expect(counts).toEqual({ [`${gw}:22`]: 1, [`${gw}:80`]: 2, [`${gw}:5432`]: 1 });
    for (const a of dropped) expect(a).toMatchObject({ decision: 'deny', runId, reason: "direct TCP from the sandbox dropped by its network rules" });
    // The same attempts are committed on the run, where `berth logs` shows them.
    expect(attempts).toEqual(audit);
    const logs = await fx.cli(['logs', runId, '--json']);
    expect(JSON.parse(logs.stdout).egress.map((a: { decision: string; target: string }) => `${a.decision} ${a.target}`)).toEqual(audit.map((a) => `${a.decision} ${a.target}`));
    const text = (await fx.cli(['logs', runId])).stdout;
    expect(text).toMatch(new RegExp(`^berth │ egress \\S+ deny GET example\\.invalid:${port} \\(not in the allow list`, 'm'));
    expect(text).toMatch(new RegExp(`^berth │ egress \\S+ deny TCP ${gw}:5432 x1 \\(direct TCP`, 'm'));
    // `show --json` lists every attempt and the dropped ones per destination, not only totals.
    const shown = JSON.parse((await fx.cli(['show', runId, '--json'])).stdout).egress;
    expect(shown).toMatchObject({ allowed: 1, denied: 5 });
    expect(shown.attempts).toEqual(audit);
    expect(shown.dropped).toEqual([
      { proto: 'TCP', target: `${gw}:22`, count: 1 },
      { proto: 'TCP', target: `${gw}:5432`, count: 1 },
      { proto: 'TCP', target: `${gw}:80`, count: 2 },
    ]);
    expect(overrides).toHaveLength(1);
    expect(end.stderr).toContain('egress denied');
    await expectNothingLeft(fx);
  });

  it('refuses an allow list with a name and an address that need the override when the override names only the address, before any sandbox exists', async () => {
    fx = await planFixture([{ name: 'one', run: 'echo one' }]);
    const envFile = `${fx.dir}/env.yaml`;
    const base = readFileSync(envFile, 'utf8');
    // localhost needs the override by name and by what it resolves to (loopback) through this host's resolver.
    writeFileSync(envFile, `${base}network: { mode: allowlist, allow: ["localhost:8080", "10.0.0.8:6379"], allowOverride: ["10.0.0.8:6379"] }\n`);
    const refused = await fx.cli(['run', fx.plan]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('network.allow: "localhost:8080" is refused');
    expect(refused.stderr).toContain('allowOverride: ["localhost:8080"]');
    expect(await fx.read(async (s) => s.listRuns())).toEqual([]);
    expect(await fx.docker.listContainers({ all: true, filters: { label: [`berth.host=${fx.hostId}`] } })).toEqual([]);
    // The boolean of older manifests gets a migration message, not a type error.
    writeFileSync(envFile, `${base}network: { mode: allowlist, allow: ["10.0.0.8:6379"], allowOverride: true }\n`);
    const old = await fx.cli(['run', fx.plan]);
    expect(old.code).not.toBe(0);
    expect(old.stderr).toContain('network.allowOverride: expected the list of network.allow patterns the override covers');
  });

  it('network.mode open is refused for a host address without the override, and otherwise recorded on the run, which reaches only the listed host port', async () => {
    const port = await serveTarget('0.0.0.0');
    const address = Object.values(networkInterfaces()).flat().find((a) => a && a.family === 'IPv4' && !a.internal)!.address;
    fx = await planFixture([
      { name: 'listed', run: `timeout 10 busybox wget -q -O - http://${address}:${port}/ok` },
      { name: 'unlisted', run: `if timeout 5 busybox nc -w 3 ${address} 22 </dev/null; then echo reached; else echo blocked; fi` },
    ]);
    const envFile = `${fx.dir}/env.yaml`;
    const base = readFileSync(envFile, 'utf8');
    writeFileSync(envFile, `${base}network: { mode: open, allow: ["${address}:${port}"] }\n`);
    const refused = await fx.cli(['run', fx.plan]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain(`"${address}:${port}" is refused: "${address}" is this host's own name or address`);

    writeFileSync(envFile, `${base}network: { mode: open, allow: ["${address}:${port}"], allowOverride: ["${address}:${port}"] }\n`);
    const end = await fx.cli(['run', fx.plan]);
    expect(end.code, end.stderr).toBe(0);
    expect(end.stderr).toContain('sandbox network is open');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const logs = JSON.parse((await fx.cli(['logs', runId, '--json'])).stdout) as { steps: Array<{ stdoutTail: string }>; network: Array<{ kind: string; mode: string; allow: string[] }> };
    expect(logs.steps.map((s) => s.stdoutTail)).toEqual(['hello /ok', 'blocked\n']);
    expect(logs.network.map((n) => [n.kind, n.mode, n.allow])).toEqual([
      ['egress.open', 'open', [`${address}:${port}`]],
      ['egress.override', 'open', [`${address}:${port}`]],
    ]);
    expect((await fx.cli(['logs', runId])).stdout).toContain('berth │ network open: outside hosts reachable, not audited');
    await expectNothingLeft(fx);
  });

  it('a host killed mid-run resumes an allowlist sandbox: the rules stayed, the proxy answers again and the re-run step reaches its target', async () => {
    const port = await serveTarget('127.0.0.1');
    fx = await planFixture([
      { name: 'first', run: `timeout 10 busybox wget -q -O - http://localhost:${port}/first` },
      { name: 'second', run: `timeout 10 busybox wget -q -O - http://localhost:${port}/second` },
    ]);
    const envFile = `${fx.dir}/env.yaml`;
    writeFileSync(envFile, `${readFileSync(envFile, 'utf8')}network: { mode: allowlist, allow: ["localhost:${port}"], allowOverride: ["localhost:${port}"] }\n`);
    fx.allowLeftovers('the kill before the second step\'s phase.complete leaves its snapshot image with no record (the record commits with the phase); by design (issue 12.2) `berth gc` removes it after its grace period, not the run\'s end', unrecordedSnapshotImages);
    const killed = await fx.cli(['run', fx.plan], { BERTH_FAULT: 'before:phase.complete:plan-step#2' });
    expect(killed.signal).toBe('SIGKILL');
    // The dead host's network and rules outlive it: the sandbox stays closed while nobody watches.
    expect(execFileSync('iptables', ['-w', '-S', 'INPUT'], { encoding: 'utf8' })).toContain(`berth:${fx.hostId}:`);
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const resumed = await fx.cli(['resume', runId]);
    expect(resumed.code, resumed.stderr).toBe(0);
    const { outputs, attempts } = await fx.read(async (s) => {
      const entries = await s.listEntries((await s.getRun(runId))!.sessionId, { runId });
      return {
        outputs: entries.filter((e) => e.kind === 'plan.step.output').map((e) => (e.body as { stdoutTail: string }).stdoutTail),
        attempts: entries.filter((e) => e.kind === 'egress.attempt').map((e) => `${(e.body as { decision: string }).decision} ${(e.body as { target: string }).target}`),
      };
    });
    expect(outputs).toEqual(['hello /first', 'hello /second']);
    // The second step ran before the kill and again after it. An attempt is recorded when its
    // connection ends, so the killed host may or may not have committed the one it saw last.
    expect(new Set(attempts)).toEqual(new Set([`allow localhost:${port}`]));
    expect(attempts.length).toBeGreaterThanOrEqual(2);
    expect(attempts.length).toBeLessThanOrEqual(3);
    await expectNothingLeft(fx);
  });
});
