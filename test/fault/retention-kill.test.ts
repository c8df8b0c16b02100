import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Snapshot } from '../../host/model';
import { requireTinyImage } from '../support/docker-engine';
import { lastJson, planFixture } from '../support/plan-fixture';

/**
 * Retention removes a snapshot's image and marks its record pruned. A host killed between the two
 * must never leave a record that says "live" without its image: a fork or a restore trusts such a
 * record and finds nothing. What it may leave is a pruned record's tag, which `berth gc` removes.
 */
let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
}, 300_000);

async function fixture(steps: number, keepLast: number) {
  const f = await planFixture(Array.from({ length: steps }, (_, i) => ({ name: `s${i}`, run: `echo ${i} > f${i % 3}` })));
  writeFileSync(
    join(f.dir, 'env.yaml'),
    `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${await requireTinyImage(f.docker)}" }\nnetwork: { mode: none }\nresources: { memoryMb: 256, commandTimeoutS: 120 }\nlease: { ttlS: 600, heartbeatS: 10 }\nsnapshot: { keepLast: ${keepLast} }\n`,
  );
  return f;
}

type Fx = Awaited<ReturnType<typeof fixture>>;
const tagged = (f: Fx, id: string) => f.docker.getImage(`berth-snapshot:${id}`).inspect().then(() => true, () => false);

/** Live records whose image is neither on the engine nor a layer still in the store. */
async function liveWithoutImage(f: Fx, all: Snapshot[]): Promise<string[]> {
  const layers = new Set(await f.read(async (s) => (await s.listSnapshotDeltas()).map((x) => x.imageId)));
  const out: string[] = [];
  for (const x of all.filter((s) => s.prunedAt === null)) if (!layers.has(x.imageId) && !(await tagged(f, x.id))) out.push(x.checkpoint);
  return out;
}

describe('a host killed while retention prunes', { timeout: 600_000 }, () => {
  it("killed at the run end's retention between a record and its image: no live record lacks its image, the newest still forks, and berth gc removes the pruned record's tag", async () => {
    fx = await fixture(4, 1);
    const killed = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: 'retention:marked' });
    expect(killed.signal, killed.stderr.slice(-2000)).toBe('SIGKILL');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const all = await fx.read((s) => s.listSnapshots({ runId }));
    expect(await liveWithoutImage(fx, all), 'live records without their image').toEqual([]);
    expect(all.filter((s) => s.prunedAt !== null).map((s) => s.checkpoint), 'the kill came at the first record retention marked').toHaveLength(1);

    const fork = await fx.cli(['fork', runId, '--at', 's3', '--json']);
    expect(fork.code, fork.stderr.slice(-2000)).toBe(0);

    const leftover = all.filter((s) => s.prunedAt !== null && s.imageId !== all.at(-1)!.imageId);
    const gc = await fx.cli(['gc', '--grace', '0', '--json']);
    expect(gc.code, gc.stderr.slice(-2000)).toBe(0);
    for (const s of leftover) expect(await tagged(fx, s.id), `pruned ${s.checkpoint} still tagged after gc`).toBe(false);
    const check = await fx.cli(['check', '--all', '--json']);
    expect(check.code, check.stdout.slice(-2000) + check.stderr.slice(-2000)).toBe(0);
  });

  it("killed in a pass of the running run between a record and its image: no live record lacks its image, the run resumes to completion, and the resumed run's end removes the pruned record's tag (gc finds nothing left)", async () => {
    // A pass every 48 commits of the session (about 16 steps); 24 steps reach one with room.
    fx = await fixture(24, 2);
    const killed = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: 'retention.running:marked' });
    expect(killed.signal, killed.stderr.slice(-2000)).toBe('SIGKILL');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const all = await fx.read((s) => s.listSnapshots({ runId }));
    const marked = all.filter((s) => s.prunedAt !== null);
    expect(await liveWithoutImage(fx, all), 'live records without their image').toEqual([]);
    expect(marked.length, 'a pass marked a record before the kill').toBeGreaterThanOrEqual(1);

    const resumed = await fx.cli(['resume', runId, '--json']);
    expect(resumed.code, resumed.stderr.slice(-2000)).toBe(0);
    expect(lastJson<{ run: { state: string } }>(resumed).run.state).toBe('completed');
    // Before any gc: the killed host's pass marked these and never removed their tags.
    for (const s of marked) expect(await tagged(fx, s.id), `pruned ${s.checkpoint} still tagged after the resumed run ended`).toBe(false);
    const end = await fx.read((s) => s.listSnapshots({ runId }));
    for (const s of end.filter((x) => x.prunedAt !== null)) expect(await tagged(fx, s.id), `pruned ${s.checkpoint} still tagged at the run's end`).toBe(false);
    expect(await liveWithoutImage(fx, end)).toEqual([]);
    const gc = await fx.cli(['gc', '--grace', '0', '--json']);
    expect(gc.code, gc.stderr.slice(-2000)).toBe(0);
  });
});
