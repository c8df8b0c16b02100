import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Run } from '../../host/model';
import { planFixture, lastJson } from '../support/plan-fixture';

type Acceptance = { state: 'pending' | 'accepted' | 'rejected' | 'none'; actor: string | null; at: number | null; reason: string | null; evidence: { command?: string; exitCode?: number; outputDigest?: string } | null };
type Cost = { cpuSeconds: number; memoryGbSeconds: number; leaseSeconds: number; snapshotBytes: number; recovery: { stepsRerun: number; restores: number } };
type Shown = { run: Run; acceptance: Acceptance; cost: Cost };
type CostReport = { runs: number; acceptedRuns: number; total: { cpuSeconds: number; leaseSeconds: number }; perAccepted: { cpuSeconds: number; leaseSeconds: number } | null; prices?: { total: number; perAccepted: number | null } };

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

// Burns CPU until the shell's own user+system time (from /proc, in clock ticks of 1/100 s) grows
// by 100 ticks: about one CPU-second whatever the machine's load, measured apart from the cgroup.
const BURN_ONE_CPU_SECOND =
  'read -r s < /proc/$$/stat; set -- ${s#*) }; start=$(( ${12} + ${13} )); i=0; ' +
  'while :; do i=$((i+1)); if [ $((i % 2000)) -eq 0 ]; then read -r s < /proc/$$/stat; set -- ${s#*) }; [ $(( ${12} + ${13} - start )) -ge 100 ] && break; fi; done; echo burned';

const show = async (runId: string) => {
  const end = await fx!.cli(['show', runId, '--json']);
  expect(end.code, end.stderr).toBe(0);
  return lastJson<Shown>(end);
};

describe('acceptance apart from completion', { timeout: 240_000 }, () => {
  it('a plan whose acceptance command fails leaves the run completed with acceptance rejected and the command exit and output digest as evidence', async () => {
    fx = await planFixture([{ name: 'build', run: 'echo built > out.txt' }]);
    appendFileSync(fx.plan, 'acceptance:\n  command: "cat out.txt; echo judged; exit 3"\n');
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const runId = lastJson<{ run: Run }>(end).run.id;
    const d = await show(runId);
    expect(d.run.state).toBe('completed');
    expect(d.acceptance.state).toBe('rejected');
    expect(d.acceptance.actor).toBe('acceptance-command');
    expect(d.acceptance.evidence).toMatchObject({ command: 'cat out.txt; echo judged; exit 3', exitCode: 3 });
    expect(d.acceptance.evidence!.outputDigest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(d.acceptance.at).toBeGreaterThan(0);
    // The acceptance command is a step like the others: its effect is recorded and confirmed.
    const effects = await fx.read((s) => s.listEffects({ runId }));
    expect(effects.map((e) => e.status)).toEqual(['confirmed', 'confirmed']);
  });

  it('berth accept and berth reject record the operator decision durably, once per request id, and never change the run state', async () => {
    fx = await planFixture([{ name: 'build', run: 'echo built' }]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const runId = lastJson<{ run: Run }>(end).run.id;
    // No acceptance in the plan: manual, pending until an operator decides.
    expect((await show(runId)).acceptance.state).toBe('pending');
    const rejected = await fx.cli(['reject', runId, '--reason', 'output looks wrong', '--request-id', 'req-r1', '--json']);
    expect(rejected.code, rejected.stderr).toBe(0);
    const again = await fx.cli(['reject', runId, '--reason', 'output looks wrong', '--request-id', 'req-r1', '--json']);
    expect(again.code, again.stderr).toBe(0);
    let d = await show(runId);
    expect(d.run.state).toBe('completed');
    expect(d.acceptance).toMatchObject({ state: 'rejected', actor: 'user:tester', reason: 'output looks wrong' });
    const decisions = await fx.read((s) => s.listAcceptance({ runId }));
    expect(decisions).toHaveLength(1);
    const accepted = await fx.cli(['accept', runId, '--request-id', 'req-a1', '--json']);
    expect(accepted.code, accepted.stderr).toBe(0);
    d = await show(runId);
    expect(d.run.state).toBe('completed');
    expect(d.acceptance).toMatchObject({ state: 'accepted', actor: 'user:tester' });
    expect(await fx.read((s) => s.listAcceptance({ runId }))).toHaveLength(2);
    // A reject without a reason is a usage error, and nothing is recorded.
    const bare = await fx.cli(['reject', runId]);
    expect(bare.code).toBe(2);
    expect(await fx.read((s) => s.listAcceptance({ runId }))).toHaveLength(2);
    // The same accept again without a request id (a command run twice from the shell's history) is
    // the decision already in force: exit 0, said so, nothing recorded. Before, each one recorded a
    // decision of its own (the run page then said "· 3 decisions").
    const twice = await fx.cli(['accept', runId, '--json']);
    expect(twice.code, twice.stderr).toBe(0);
    expect(lastJson<{ repeated: boolean; decision: { requestId: string } }>(twice)).toMatchObject({ repeated: true, decision: { requestId: 'req-a1' } });
    const text = await fx.cli(['accept', runId]);
    expect(text.stdout).toMatch(/^already recorded: accepted run \S+ as user:tester/);
    expect(await fx.read((s) => s.listAcceptance({ runId }))).toHaveLength(2);
  });
});

describe('cost per accepted job', { timeout: 300_000 }, () => {
  it('a step that burns about one CPU-second shows 0.8 to 1.2 CPU-seconds more than the same run without the burn, and berth cost divides by accepted runs only', async () => {
    fx = await planFixture([{ name: 'burn', run: BURN_ONE_CPU_SECOND }]);
    writeFileSync(join(fx.dir, 'accepting.yaml'), `${readFileSync(fx.plan, 'utf8')}acceptance:\n  command: "true"\n`);
    writeFileSync(join(fx.dir, 'rejecting.yaml'), `${readFileSync(fx.plan, 'utf8')}acceptance:\n  command: "false"\n`);
    // The same run with a step that burns nothing: a run's cost counts all of its sandbox's CPU,
    // the engine's own per-command setup inside the container included (runc's init joins the
    // container's cgroup), which grows with the machine's load: CI measured 1.25 s for a burn run.
    writeFileSync(join(fx.dir, 'idle.yaml'), `${readFileSync(fx.plan, 'utf8').replace(JSON.stringify(BURN_ONE_CPU_SECOND), '"echo burned"')}acceptance:\n  command: "true"\n`);
    const idle = await fx.cli(['run', join(fx.dir, 'idle.yaml'), '--json']);
    expect(idle.code, idle.stderr).toBe(0);
    const base = await show(lastJson<{ run: Run }>(idle).run.id);
    const ok = await fx.cli(['run', join(fx.dir, 'accepting.yaml'), '--json']);
    expect(ok.code, ok.stderr).toBe(0);
    const bad = await fx.cli(['run', join(fx.dir, 'rejecting.yaml'), '--json']);
    expect(bad.code, bad.stderr).toBe(0);
    const a = await show(lastJson<{ run: Run }>(ok).run.id);
    const b = await show(lastJson<{ run: Run }>(bad).run.id);
    expect([a.acceptance.state, b.acceptance.state]).toEqual(['accepted', 'rejected']);
    console.info(`cpu seconds: idle run ${base.cost.cpuSeconds}, burn runs ${a.cost.cpuSeconds} and ${b.cost.cpuSeconds}`);
    for (const d of [a, b]) {
      expect(d.cost.cpuSeconds - base.cost.cpuSeconds).toBeGreaterThanOrEqual(0.8);
      expect(d.cost.cpuSeconds - base.cost.cpuSeconds).toBeLessThanOrEqual(1.2);
      expect(d.cost.memoryGbSeconds).toBeGreaterThan(0);
      expect(d.cost.leaseSeconds).toBeGreaterThan(0);
      expect(d.cost.snapshotBytes).toBeGreaterThan(0);
      expect(d.cost.recovery).toEqual({ stepsRerun: 0, restores: 0 });
    }
    const cost = await fx.cli(['cost', '--json']);
    expect(cost.code, cost.stderr).toBe(0);
    const report = lastJson<CostReport>(cost);
    expect(report.runs).toBe(3);
    expect(report.acceptedRuns).toBe(2);
    expect(report.total.cpuSeconds).toBeCloseTo(base.cost.cpuSeconds + a.cost.cpuSeconds + b.cost.cpuSeconds, 6);
    // The three runs' cost, carried by the two accepted runs.
    expect(report.perAccepted!.cpuSeconds).toBeCloseTo(report.total.cpuSeconds / 2, 6);
    // --since after both runs: nothing to sum, nothing to divide.
    const later = lastJson<CostReport>(await fx.cli(['cost', '--since', new Date(Date.now() + 60_000).toISOString(), '--json']));
    expect([later.runs, later.acceptedRuns, later.perAccepted]).toEqual([0, 0, null]);
  });

  it('prices come from a host config file validated by field, and price the accepted-run figure', async () => {
    fx = await planFixture([{ name: 'build', run: 'echo built' }]);
    appendFileSync(fx.plan, 'acceptance:\n  command: "true"\n');
    expect((await fx.cli(['run', fx.plan, '--json'])).code).toBe(0);
    const config = join(fx.dir, 'berth.config.yaml');
    writeFileSync(config, 'prices:\n  perCpuHour: "cheap"\n');
    const badEnd = await fx.cli(['cost', '--config', config]);
    expect(badEnd.code).toBe(1);
    expect(badEnd.stderr).toContain('prices.perCpuHour');
    writeFileSync(config, 'prices:\n  perCpuHour: 3600\n  perGbMonth: 0\n  tokens: { default: { prompt: 1, completion: 2 } }\n');
    const report = lastJson<CostReport & { total: { cpuSeconds: number } }>(await fx.cli(['cost', '--config', config, '--json']));
    // 3600 per CPU-hour is 1 per CPU-second: the price equals the CPU-seconds (no tokens, storage free).
    expect(report.prices!.total).toBeCloseTo(report.total.cpuSeconds, 6);
    expect(report.prices!.perAccepted).toBeCloseTo(report.total.cpuSeconds, 6);
  });
});
