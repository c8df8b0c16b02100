import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { unrecordedSnapshotImages } from '../support/leak-check';
import { planFixture } from '../support/plan-fixture';
import { sampleBoundaries } from '../support/crash-sample';
import { STORE_KINDS, sharedPostgres, stopSharedPostgres, type StoreKind } from '../support/store-kinds';

afterAll(stopSharedPostgres, 60_000);

/** A SQLite file in the fixture's dir (default), or a fresh PostgreSQL database. */
const storeFor = async (kind: StoreKind) => (kind === 'postgres' ? { store: await (await sharedPostgres()).createStoreDatabase('plan') } : {});

// Each step appends to a log in the workspace: a step run twice on the same sandbox state would
// show in the final workspace digest.
const STEPS = [
  { name: 'configure', run: 'echo configure >> steps.log && mkdir -p build && echo cfg > build/config' },
  { name: 'build', run: 'echo build >> steps.log && head -c 50000 /dev/zero > build/artifact && cp README build/' },
  { name: 'test', run: 'echo test >> steps.log && test -s build/artifact && wc -l steps.log > build/report' },
];

async function finalDigest(fx: Awaited<ReturnType<typeof planFixture>>): Promise<string> {
  return fx.read(async (s) => (await s.listSnapshots({})).at(-1)!.workspaceDigest);
}

/** The plan's log as the newest snapshot holds it, read from a container of that image. */
async function stepsLog(fx: Awaited<ReturnType<typeof planFixture>>, imageId: string): Promise<string> {
  const c = await fx.docker.createContainer({ Image: imageId, Cmd: ['cat', '/workspace/steps.log'], Labels: { 'berth.host': fx.hostId } });
  try {
    await c.start();
    await c.wait();
    // Drop the 8-byte stream headers of the multiplexed log.
    return (await c.logs({ stdout: true })).toString('utf8').replace(/[\x00-\x08]/g, '').replace(/^[^a-z]+/gm, '');
  } finally {
    await c.remove({ force: true });
  }
}

describe.each(STORE_KINDS)('plan run killed at every commit boundary (%s store)', (kind) => {
  it('resumes with the sandbox alive, never re-runs a finished step, and ends with the uninterrupted workspace', { timeout: 900_000 }, async () => {
    const base = await planFixture(STEPS, undefined, await storeFor(kind));
    const log = join(base.dir, 'faults.log');
    const first = await base.cli(['run', base.plan, '--json'], { BERTH_FAULT_LOG: log });
    expect(first.code, first.stderr).toBe(0);
    const boundaries = readFileSync(log, 'utf8').trim().split('\n').map((l) => l.split(' ')[1]!);
    const expected = await finalDigest(base);
    await base.cleanup();
    const seen = new Map<string, number>();
    const all = boundaries.map((b) => `${b}#${seen.set(b, (seen.get(b) ?? 0) + 1).get(b)}`);
    expect(all.length).toBeGreaterThan(20);
    // A seeded share of the boundaries: an eighth on SQLite, a twelfth on PostgreSQL (CI time: each
    // kill is a plan run and its resume, 8-9 s at load; all 53 on SQLite took 420 s, a third 89 s
    // on the slow CI machine. The commit
    // kinds are each killed on both stores by crash-every-boundary). BERTH_CRASH_ALL=1 takes them
    // all, BERTH_CRASH_SEED replays a sample.
    const targets = sampleBoundaries(all, kind === 'postgres' ? 1 / 12 : 1 / 8, `plan crash test (${kind})`);

    const failures: string[] = [];
    const check = async (target: string) => {
      const fx = await planFixture(STEPS, undefined, await storeFor(kind));
      // A kill between a snapshot's image commit and its record's commit leaves that image unrecorded:
      // gc's to remove after its grace period (issue 12.2). Containers and networks stay checked.
      fx.allowLeftovers(`killed at ${target}: a snapshot image whose record never committed is gc's`, unrecordedSnapshotImages);
      try {
        const killed = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: target });
        if (killed.signal !== 'SIGKILL') return void failures.push(`${target}: not killed (code ${killed.code}) ${killed.stderr.slice(-500)}`);
        const runs = await fx.read((s) => s.listRuns());
        if (runs.length === 0) {
          // Killed before the submission committed: nothing to resume; a new run is the user's retry.
          const again = await fx.cli(['run', fx.plan, '--json']);
          if (again.code !== 0) failures.push(`${target}: rerun failed ${again.stderr.slice(-500)}`);
          return;
        }
        const runId = runs[0]!.id;
        const doneBefore = new Set((await fx.read((s) => s.listEffects({ runId }))).filter((e) => e.status === 'confirmed').map((e) => e.id));
        const resumed = await fx.cli(['resume', runId, '--json']);
        if (resumed.code !== 0) return void failures.push(`${target}: resume ended ${resumed.code}: ${resumed.stderr.slice(-800)}`);
        const effects = await fx.read((s) => s.listEffects({ runId }));
        for (const e of effects) {
          if (doneBefore.has(e.id) && e.attempts !== 1) failures.push(`${target}: finished step ${e.id} ran again (${e.attempts} attempts)`);
          if (e.attempts > 2) failures.push(`${target}: ${e.id} ran ${e.attempts} times`);
        }
        if (effects.length !== 3 || effects.some((e) => e.status !== 'confirmed')) failures.push(`${target}: effects ${JSON.stringify(effects.map((e) => [e.id, e.status]))}`);
        // Re-running a safe step starts from the last snapshot, so the log holds each step once.
        const newest = await fx.read(async (s) => (await s.listSnapshots({ runId })).at(-1)!);
        if (newest.checkpoint !== 'step:2:test') failures.push(`${target}: newest snapshot is ${newest.checkpoint}`);
        if (newest.workspaceDigest !== expected) failures.push(`${target}: final workspace ${newest.workspaceDigest}, uninterrupted ${expected}`);
        const log = await stepsLog(fx, newest.imageId);
        if (log.trim().split('\n').join(',') !== 'configure,build,test') failures.push(`${target}: steps.log is ${JSON.stringify(log)}`);
      } finally {
        // A leak is this target's failure, not the end of the other workers' targets.
        await fx.cleanup().catch((err: unknown) => failures.push(`${target}: ${(err as Error).message}`));
      }
    };
    const queue = [...targets];
    await Promise.all(Array.from({ length: 3 }, async () => {
      for (let t = queue.shift(); t !== undefined; t = queue.shift()) await check(t);
    }));
    console.log(`plan crash test (${kind}): ${targets.length} boundaries`);
    expect(failures).toEqual([]);
  });
});
