import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { unrecordedSnapshotImages } from '../support/leak-check';
import { lastJson, planFixture } from '../support/plan-fixture';

type Fixture = Awaited<ReturnType<typeof planFixture>>;

/** Snapshot tags on the engine for this host that no record of the store names. */
async function unrecordedTags(fx: Fixture): Promise<string[]> {
  const images = await fx.docker.listImages({ filters: { label: [`berth.host=${fx.hostId}`, 'berth.snapshot'] } });
  const tags = images.flatMap((i) => (i.RepoTags ?? []).filter((t) => t.startsWith('berth-snapshot:')).map((t) => t.slice('berth-snapshot:'.length)));
  const recorded = new Set(await fx.read(async (s) => (await s.listSnapshots({})).map((r) => r.id)));
  return tags.filter((t) => !recorded.has(t)).sort();
}

describe('berth gc says what it removed and what it kept', () => {
  it('names the unrecorded snapshot image it keeps inside the grace (instead of "no unrecorded snapshot images"), and removes it with --grace 0', { timeout: 600_000 }, async () => {
    const fx = await planFixture([
      // Over the 1 MiB a snapshot may write as a layer on the host: step one's snapshot is a docker commit.
      { name: 'one', run: 'head -c 2000000 /dev/urandom > one.bin' },
      { name: 'two', run: 'echo two > two.txt' },
    ]);
    try {
      const killed = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: 'before:phase.complete:plan-step#1' });
      expect(killed.signal, killed.stderr.slice(-500)).toBe('SIGKILL');
      const left = await unrecordedTags(fx);
      expect(left.length, 'the kill left an image no record names').toBeGreaterThanOrEqual(1);
      const runId = (await fx.read((s) => s.listRuns()))[0]!.id;
      const resumed = await fx.cli(['resume', runId, '--json']);
      expect(resumed.code, resumed.stderr.slice(-800)).toBe(0);

      const human = await fx.cli(['gc']);
      expect(human.code, human.stderr.slice(-500)).toBe(0);
      expect(human.stdout).not.toContain('no unrecorded snapshot images');
      expect(human.stdout).toContain(`kept ${left.length} unrecorded snapshot image tag(s) inside the 600 s grace`);
      for (const tag of left) expect(human.stdout).toContain(tag);
      const json = lastJson<{ keptImages: Array<{ snapshotId: string; why: string }>; unrecordedImages: unknown[] }>(await fx.cli(['gc', '--json']));
      expect(json.keptImages.filter((k) => k.why === 'grace').map((k) => k.snapshotId).sort()).toEqual(left);
      expect(json.unrecordedImages).toEqual([]);

      const now = await fx.cli(['gc', '--grace', '0']);
      expect(now.stdout).toContain(`removed ${left.length} unrecorded snapshot image tag(s)`);
      expect(now.stdout).not.toContain('inside the');
      expect(await unrecordedTags(fx)).toEqual([]);
    } finally {
      await fx.cleanup();
    }
  });

  it('reports the container, sandbox network and firewall rules of a lease a killed host had just released, and removes them at once (not only once the network is two minutes old)', { timeout: 600_000 }, async () => {
    const fx = await planFixture([{ name: 'wait', run: 'echo done' }]);
    try {
      appendFileSync(join(fx.dir, 'env.yaml'), 'network: { mode: allowlist, allow: ["example.invalid:80"] }\n');
      const killed = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: 'before:phase.complete:plan-step#1' });
      expect(killed.signal, killed.stderr.slice(-500)).toBe('SIGKILL');
      fx.allowLeftovers('the host is killed before its step checkpoint and the run is left so', unrecordedSnapshotImages);
      const nets = async () => (await fx.docker.listNetworks({ filters: { label: [`berth.host=${fx.hostId}`] } })).map((n) => n.Name);
      const before = await nets();
      expect(before.length, 'the killed host left its sandbox network').toBe(1);
      // The host's last act before it died: its lease released, the sweep that would follow never ran.
      const lease = await fx.read(async (s) => {
        const l = (await s.listLeases({ unreleased: true }))[0]!;
        await s.releaseLease(l.id, Date.now());
        return l;
      });
      const human = await fx.cli(['gc']);
      expect(human.code, human.stderr.slice(-500)).toBe(0);
      expect(human.stdout).toContain(`removed 1 sandbox network(s): ${before[0]} (lease ${lease.id})`);
      expect(human.stdout).toMatch(/removed \d+ firewall rule\(s\):\n {2}ip/);
      expect(human.stdout).toContain(lease.id);
      expect(await nets()).toEqual([]);
      const again = lastJson<{ removed: unknown[]; egress: { networks: unknown[]; rules: string[]; keptNetworks: unknown[] } }>(await fx.cli(['gc', '--json']));
      expect(again.egress).toEqual({ networks: [], rules: [], keptNetworks: [] });
    } finally {
      await fx.cleanup();
    }
  });
});
