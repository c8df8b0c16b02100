import { afterEach, describe, expect, it } from 'vitest';
import type { Run } from '../../host/model';
import { lastJson, planFixture } from '../support/plan-fixture';
import { freezeOutsideWrite, sleep, startCli, stepRunning, processesOf, stopChildren, waitFor, type WorkerProcess } from '../support/fleet';

/**
 * `berth cancel` of a run whose owner is alive but not working (SIGSTOP: a frozen host, a paused
 * VM): its process exists, so it used to read as the live host that "stops it now", and the run
 * stayed `cancelling` with its command running while the owner stayed frozen. Real Docker, real
 * SQLite, a real `berth run` child frozen and woken with SIGSTOP/SIGCONT, short ownership leases.
 */

type Fixture = Awaited<ReturnType<typeof planFixture>>;
let fx: Fixture | undefined;
let children: WorkerProcess[] = [];
afterEach(async () => {
  await stopChildren(children, 20_000);
  children = [];
  await fx?.cleanup();
  fx = undefined;
});


/** `berth run` of a plan whose second step runs `sleep 121`, with the ownership TTL `ttlMs`; resolves once that command runs. */
async function longRun(ttlMs: number): Promise<{ f: Fixture; host: WorkerProcess; run: Run; ttl: Record<string, string> }> {
  const f = (fx = await planFixture([
    { name: 'one', run: 'echo one >> steps.log' },
    { name: 'long', run: 'sleep 121 && echo long >> steps.log' },
  ]));
  const ttl = { BERTH_LEASE_TTL_MS: String(ttlMs) };
  const host = await startCli(f, ['run', f.plan], ttl);
  children.push(host);
  const run = await waitFor('the run to exist', () => f.read(async (s) => (await s.listRuns())[0]), 60_000);
  await waitFor('the long step to run', () => stepRunning(f, run.id, 1), 60_000);
  await waitFor('its command to start', async () => ((await processesOf(f, run.sessionId, 'sleep 121')) > 0 ? true : undefined), 60_000);
  return { f, host, run, ttl };
}

interface CancelJson {
  case: string;
  owner: { pid: number; live: boolean } | null;
  claim: { state: string; heartbeatAgeMs: number; expiresInMs: number; leaseUntil: number; ttlMs: number } | null;
  wait: unknown;
}

describe('berth cancel of a run whose owner is alive but not working', { timeout: 180_000 }, () => {
  it('says a frozen owner has not renewed its claim and when it expires; cancel --wait then carries the cancel out, and the woken owner commits nothing', async () => {
    // 40 s: the commands below start between overdue (20 s) and expiry (40 s); with 15 s they ran one
    // after another in a 7.5 s window, which a loaded machine's CLI starts overran (full suite, load
    // ~6: the claim had expired when --wait began, and its case was no_live_host).
    const { f, host, run, ttl } = await longRun(40_000);
    // Frozen outside a write of the SQLite file, which would hold every other writer back.
    await freezeOutsideWrite(host.child, f.store);
    // Past half the TTL without a renewal (it renews every third): overdue, the claim still holding.
    await waitFor('the claim to be overdue', () => f.read(async (s) => {
      const o = (await s.getSessionOwner(run.sessionId))!;
      return (await s.databaseNow()) - o.heartbeatAt > 20_200 ? true : undefined;
    }), 40_000, 100);

    // The text first (its commit of the cancel); then the JSON, the status and --wait side by side,
    // all started well inside the window (--wait too: started after the claim's expiry, it would
    // rightly find no live host and carry the cancel out at once, as in a second full suite at load ~6).
    const said = await f.cli(['cancel', run.id], ttl);
    expect(said.code, said.stderr).toBe(0);
    expect(said.stdout).toContain(`has not renewed its claim for`);
    expect(said.stdout).toContain(`host ${f.hostId} (pid ${host.pid}), is alive`);
    expect(said.stdout).toMatch(/it stops the run when it runs again\. Its claim expires at \d{4}-\d\d-\d\dT[\d:.]+Z \(in [\d.]+s, store clock\)/);
    expect(said.stdout).toContain(`berth cancel ${run.id} --wait waits for that and does it`);
    expect(said.stdout).not.toContain('stops it now');
    // Nobody carried it out: the run is cancelling and its command still runs.
    expect((await f.read((s) => s.getRun(run.id)))!.state).toBe('cancelling');
    expect(await processesOf(f, run.sessionId, 'sleep 121')).toBe(1);

    const [asJson, status, waited] = await Promise.all([f.cli(['cancel', run.id, '--json'], ttl), f.cli(['status'], ttl), f.cli(['cancel', run.id, '--wait', '--json'], ttl)]);
    expect(asJson.code, asJson.stderr).toBe(0);
    const j = lastJson<CancelJson>(asJson);
    expect(j.case).toBe('owner_overdue');
    expect(j.owner).toMatchObject({ pid: host.pid, live: true });
    expect(j.claim).toMatchObject({ state: 'overdue', ttlMs: 40_000 });
    expect(j.claim!.heartbeatAgeMs).toBeGreaterThan(20_000);
    expect(j.claim!.expiresInMs).toBeGreaterThan(0);
    // berth status says the same of the owner.
    expect(status.stdout).toMatch(new RegExp(`cancelling on host ${f.hostId} \\(pid ${host.pid}\\) \\(heartbeat [\\d.]+s ago: not renewing, claim expires in [\\d.]+s\\)`));

    expect(waited.code, waited.stderr).toBe(0);
    const done = lastJson<{ run: Run; cancel: { case: string; claim: { leaseUntil: number }; wait: { outcome: string; waitedMs: number } }; resume: { epoch: number } }>(waited);
    expect(done.run.state).toBe('cancelled');
    expect(done.cancel).toMatchObject({ case: 'owner_overdue', wait: { outcome: 'carried_out' } });
    expect(done.cancel.wait.waitedMs).toBeGreaterThan(0);
    // Carried out only once the frozen owner's claim had expired, on the store's clock.
    const ended = (await f.read((s) => s.listRunTransitions(run.id))).at(-1)!;
    expect(ended.to).toBe('cancelled');
    expect(ended.at).toBeGreaterThan(done.cancel.claim.leaseUntil);
    expect(await processesOf(f, run.sessionId, 'sleep 121')).toBe(0);
    const before = await f.read(async (s) => ({ commits: (await s.listCommits(run.sessionId)).length, owner: (await s.getSessionOwner(run.sessionId))! }));
    expect(done.resume.epoch).toBe(before.owner.epoch);

    // Woken: its renewal is refused (the claim lapsed, a new epoch holds the run) and it stops
    // all work on the run without committing anything: the cancel stands as carried out.
    host.child.kill('SIGCONT');
    const code = await Promise.race([host.exited, sleep(30_000).then(() => 'still running' as const)]);
    // It stops as a host that lost the run (exit 4), whichever it learns first: that its renewal
    // is refused, or that the run ended by the host that took it (it used to report that end as
    // its own: "run R is cancelled", exit 1).
    expect(code, host.stderr()).toBe(4);
    expect(host.stderr()).toContain('execution_right_lost');
    expect(host.stderr()).toMatch(new RegExp(`run ${run.id} ended \\(cancelled\\) by host ${f.hostId} .*after this host's lease ran out|lease on run ${run.id} ran out`));
    expect(host.stderr()).not.toContain(`run ${run.id} is cancelled`);
    const after = await f.read(async (s) => ({ run: (await s.getRun(run.id))!, commits: (await s.listCommits(run.sessionId)).length, owner: (await s.getSessionOwner(run.sessionId))! }));
    expect(after.run.state).toBe('cancelled');
    expect(after.commits).toBe(before.commits);
    expect(after.owner.epoch).toBe(before.owner.epoch);
  });

  it('leaves a cancel of a run whose owner renews to that owner, saying which case it was', async () => {
    const { f, host, run, ttl } = await longRun(8000);
    const status = await f.cli(['status'], ttl);
    expect(status.stdout).toMatch(new RegExp(`running on host ${f.hostId} \\(pid ${host.pid}\\) \\(heartbeat [\\d.]+s ago\\)`));
    const said = await f.cli(['cancel', run.id, '--json'], ttl);
    expect(said.code, said.stderr).toBe(0);
    const j = lastJson<CancelJson>(said);
    expect(j.case).toBe('owner_renews');
    expect(j.claim).toMatchObject({ state: 'renewing', ttlMs: 8000 });
    expect(j.owner).toMatchObject({ pid: host.pid, live: true });
    // Its owner carries it out (berth run exits 1 for a run that did not complete).
    expect(await host.exited, host.stderr()).toBe(1);
    expect(host.stderr()).toContain(`run ${run.id} is cancelled: root task cancelled`);
    expect((await f.read((s) => s.getRun(run.id)))!.state).toBe('cancelled');
    expect(await processesOf(f, run.sessionId, 'sleep 121')).toBe(0);
  });
  it('cancel --wait of a run whose owner renews returns once that owner ended the run cancelled', async () => {
    const { f, host, run, ttl } = await longRun(8000);
    const said = await f.cli(['cancel', run.id, '--wait', '--json'], ttl);
    expect(said.code, said.stderr).toBe(0);
    const j = lastJson<CancelJson & { state: string; wait: { outcome: string; waitedMs: number } }>(said);
    expect(j).toMatchObject({ case: 'owner_renews', state: 'cancelled', wait: { outcome: 'ended' } });
    expect(j.owner).toMatchObject({ pid: host.pid, live: true });
    // The owner did it, not this command: no second epoch.
    expect((await f.read((s) => s.getSessionOwner(run.sessionId)))!.epoch).toBe(1);
    expect(await host.exited, host.stderr()).toBe(1);
    expect(await processesOf(f, run.sessionId, 'sleep 121')).toBe(0);
  });
});
