import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { commitCancel } from '../../host/api/decisions';
import { openStore } from '../../host/store';
import { bundledCli, lastJson, planFixture } from '../support/plan-fixture';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

const STEPS = [{ name: 'build', run: 'echo built > out.txt' }];

async function submitDetached(f: NonNullable<typeof fx>): Promise<string> {
  const r = await f.cli(['run', f.plan, '--detach', '--json']);
  expect(r.code, r.stderr).toBe(0);
  return lastJson<{ run: { id: string } }>(r).run.id;
}

describe('berth cancel, repeated and after a cancel that did not finish', { timeout: 120_000 }, () => {
  it('ends a run cancelled before its first step with exit 0 and no failure line, says so again on a second cancel, and finishes a cancel whose first command died after its commit', async () => {
    fx = await planFixture(STEPS);
    const runId = await submitDetached(fx);

    const first = await fx.cli(['cancel', runId]);
    expect(first.code, first.stderr).toBe(0);
    // Before: "berth: run RUN is cancelled: root task cancelled" on stderr, the line every failed run gets.
    expect(first.stderr).not.toContain(`berth: run ${runId}`);
    // Before: a step table's header with no row under it.
    expect(first.stdout).toContain('no step ran');
    expect(first.stdout).not.toContain('STEP');
    expect((await fx.read((s) => s.getRun(runId)))!.state).toBe('cancelled');
    const commits = (await fx.read(async (s) => s.listCommits((await s.getRun(runId))!.sessionId))).length;

    // Before: exit 1, run_not_cancellable ("run RUN is cancelled; only admitted, running, ... can be cancelled").
    const again = await fx.cli(['cancel', runId]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout.trim()).toBe(`run ${runId} is already cancelled`);
    const againJson = await fx.cli(['cancel', runId, '--json']);
    expect(againJson.code, againJson.stderr).toBe(0);
    expect(lastJson(againJson)).toMatchObject({ runId, already: 'cancelled' });
    // Nothing was committed by the repeats: the first cancel's actor and time stand.
    expect((await fx.read(async (s) => s.listCommits((await s.getRun(runId))!.sessionId))).length).toBe(commits);

    // A `berth cancel` killed right after its commit leaves the run `cancelling` with no host.
    const second = await submitDetached(fx);
    const store = await openStore(fx.store);
    try {
      await commitCancel(store, second, 'user:tester');
    } finally {
      await store.close();
    }
    expect((await fx.read((s) => s.getRun(second)))!.state).toBe('cancelling');
    // Before: exit 1, run_not_cancellable; only `berth resume` (which the message did not name) finished it.
    const finish = await fx.cli(['cancel', second]);
    expect(finish.code, finish.stderr).toBe(0);
    expect(finish.stderr).toContain(`cancel of run ${second} was committed before; no live host drives it, so this one carries it out`);
    expect((await fx.read((s) => s.getRun(second)))!.state).toBe('cancelled');
    const transitions = await fx.read((s) => s.listRunTransitions(second));
    expect(transitions.filter((t) => t.to === 'cancelling')).toHaveLength(1);

    // A completed run still cannot be cancelled: that is an error, not a repeat.
    const done = await submitDetached(fx);
    const run = await fx.cli(['resume', done]);
    expect(run.code, run.stderr).toBe(0);
    const late = await fx.cli(['cancel', done]);
    expect(late.code).toBe(1);
    expect(late.stderr).toContain('run_not_cancellable');
  });

  it('a cancel whose carry-out claim loses to a resume that took the run meanwhile says the resume carries it out, exit 0, and the resume ends the run cancelled', async () => {
    fx = await planFixture(STEPS);
    const runId = await submitDetached(fx);
    const go = (name: string) => join(fx!.dir, name);
    const held = async (name: string) => {
      while (!existsSync(`${go(name)}.held`)) await sleep(50);
    };
    // The race replayed in order: the cancel has committed and found no live host; before its own
    // claim, a resume claims the run; then the cancel claims, and is refused.
    const cancelling = fx.cli(['cancel', runId, '--json'], { BERTH_FAULT_HOLD: `cancel.committed=${go('cancel-go')}` });
    let resuming: ReturnType<typeof fx.cli> | undefined;
    try {
      await held('cancel-go');
      resuming = fx.cli(['resume', runId, '--json'], { BERTH_FAULT_HOLD: `resume.claimed=${go('resume-go')}` });
      await held('resume-go');
      writeFileSync(go('cancel-go'), '');
      const cancelled = await cancelling;
      // Before: exit 1, run_owned "... it is alive, so nothing was changed", after its cancel had been committed.
      expect(cancelled.code, cancelled.stderr).toBe(0);
      const owner = await fx.read(async (s) => s.getSessionOwner((await s.getRun(runId))!.sessionId));
      expect(lastJson(cancelled)).toMatchObject({ runId, requested: true, owner: { hostId: owner!.holder, pid: owner!.pid, live: true } });
    } finally {
      // Never leave a held process behind, whatever failed above.
      writeFileSync(go('cancel-go'), '');
      writeFileSync(go('resume-go'), '');
      await Promise.all([cancelling, resuming]);
    }
    expect((await fx.read((s) => s.getRun(runId)))!.state).toBe('cancelled');
    expect((await fx.read((s) => s.listRunTransitions(runId))).filter((t) => t.to === 'cancelling')).toHaveLength(1);
  });

  it('carries the cancel out itself when the host that drove the run was SIGKILLed and is a zombie its parent has not reaped', async () => {
    fx = await planFixture([{ name: 'hold', run: 'sleep 120' }]);
    const f = fx;
    // The host's parent is a shell that `exec`s a program that never waits: a SIGKILLed host stays
    // a zombie (as under an init that reaps late), which `kill(pid, 0)` still finds.
    const parent = spawn('sh', ['-c', `"${process.execPath}" "${await bundledCli()}" run "${f.plan}" --store "${f.store}" >/dev/null 2>&1 & echo $!; exec sleep 600`], {
      env: { ...process.env, BERTH_HOST_ID: f.hostId, BERTH_OPERATOR: 'tester' },
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    try {
      const pid = Number(await new Promise<string>((resolve) => parent.stdout.once('data', (d: Buffer) => resolve(d.toString().trim()))));
      let runId: string | undefined;
      while (!runId) {
        runId = await f.read(async (s) => {
          const runs = existsSync(f.store) ? await s.listRuns({}) : [];
          for (const r of runs) if ((await s.listEffects({ runId: r.id })).some((e) => e.status === 'executing')) return r.id;
          return undefined;
        }).catch(() => undefined);
        if (!runId) await sleep(100);
      }
      process.kill(pid, 'SIGKILL');
      const state = () => {
        const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
        return stat.charAt(stat.lastIndexOf(')') + 2);
      };
      while (state() !== 'Z') await sleep(20);

      const cancelled = await f.cli(['cancel', runId]);
      // Before: exit 0 with "host H (pid P) drives it and stops it now", and the run stayed `cancelling`.
      expect(cancelled.stderr).toContain('no live host drives it, so this one carries it out');
      expect(cancelled.code, cancelled.stderr).toBe(0);
      expect(state()).toBe('Z');
      expect((await f.read((s) => s.getRun(runId!)))!.state).toBe('cancelled');
    } finally {
      parent.kill('SIGKILL');
    }
  });
});
