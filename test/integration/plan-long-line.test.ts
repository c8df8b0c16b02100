import { afterEach, describe, expect, it } from 'vitest';
import { bundledCli, planFixture } from '../support/plan-fixture';
import { runNodeMeasured } from '../support/measured-child';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

const MIB48 = 48 << 20;

describe('output of any shape', { timeout: 300_000 }, () => {
  it('a step printing one 48 MiB line runs through `berth run` under 300 MB of RSS, shows the line cut with a count, and `berth logs` shows it bounded', async () => {
    // A control character inside the line must still reach the terminal escaped.
    fx = await planFixture([{ name: 'long', run: `printf '\\033[2J'; head -c ${MIB48} /dev/zero | tr '\\0' a; echo; echo after` }]);
    const end = await runNodeMeasured(await bundledCli(), ['run', fx.plan, '--store', fx.store], { BERTH_HOST_ID: fx.hostId, BERTH_OPERATOR: 'tester' }, 240_000);
    expect(end.code, end.stderrTail).toBe(0);
    console.info(`48 MiB line: ${end.wallMs} ms, peak RSS ${end.peakRssMb.toFixed(0)} MB, ${end.stderrBytes} B on stderr`);
    expect(end.peakRssMb, `peak RSS ${end.peakRssMb.toFixed(0)} MB`).toBeLessThan(300);
    // The live view kept the head of the line and said how much of it was cut; the escape stays escaped.
    expect(end.stderrBytes).toBeLessThan(1 << 20);
    expect(end.stderrTail).toMatch(/characters cut/);
    expect(end.stderrTail).toContain('after');
    expect(end.stderrTail).not.toContain('\x1b');

    // The store keeps the step's bounded tail, not the line.
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const out = await fx.read(async (s) => (await s.listEntries((await s.getRun(runId))!.sessionId)).find((e) => e.kind === 'plan.step.output')!.body as { stdoutTail: string });
    expect(out.stdoutTail.length).toBeLessThanOrEqual(8192);
    expect(out.stdoutTail).toMatch(/a\nafter\n$/);

    const logs = await fx.cli(['logs', runId]);
    expect(logs.code, logs.stderr).toBe(0);
    expect(logs.stdout.length).toBeLessThan(64 << 10);
    expect(logs.stdout).toContain('  out │ after');
  });

  it('a terminal that stops reading while a step prints 48 MiB in lines costs the CLI under 300 MB, and it says how many lines it skipped', async () => {
    fx = await planFixture([{ name: 'lines', run: `yes ${'a'.repeat(99)} | head -c ${MIB48}; echo done-printing` }]);
    const end = await runNodeMeasured(await bundledCli(), ['run', fx.plan, '--store', fx.store], { BERTH_HOST_ID: fx.hostId, BERTH_OPERATOR: 'tester' }, 240_000, {
      // The summary on stdout comes after the step ended: every output line was written (or skipped) while stderr was unread.
      stallStderrUntilStdout: /acceptance: pending/,
    });
    expect(end.code, end.stderrTail).toBe(0);
    console.info(`48 MiB in lines, stalled terminal: ${end.wallMs} ms, peak RSS ${end.peakRssMb.toFixed(0)} MB, ${end.stderrBytes} B on stderr`);
    expect(end.peakRssMb, `peak RSS ${end.peakRssMb.toFixed(0)} MB`).toBeLessThan(300);
    expect(end.stderrTail).toMatch(/… \d+ output line\(s\) not shown: the terminal fell behind/);
    expect(end.stderrTail).toMatch(/✔ lines exit 0/);
  });
});
