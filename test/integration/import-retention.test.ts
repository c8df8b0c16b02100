import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { RunRecordSchema, type RunRecord } from '../../host/record';
import { runNode } from '../support/child';
import { invariantGuard } from '../support/invariant-check';
import { bundledCli, lastJson, planFixture, removeHostArtifacts } from '../support/plan-fixture';
import { readStore } from '../support/temp-store';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
const otherHost = `other-${process.pid}`;
afterEach(async () => {
  if (fx) await removeHostArtifacts(fx.docker, otherHost);
  await fx?.cleanup();
  fx = undefined;
});

/** `berth` against another store than the fixture's, as another host on the same engine. */
async function cliOn(store: string, args: string[]) {
  return runNode(await bundledCli(), [...args, '--store', store], { BERTH_HOST_ID: otherHost, BERTH_OPERATOR: 'tester' });
}

const readRecord = (file: string): RunRecord => RunRecordSchema.parse(JSON.parse(readFileSync(file, 'utf8')));
/** A record's content, without what differs between exports of one run (when, from which store). */
const timeless = (x: RunRecord) => ({ ...x, digest: '', exportedAt: 0, source: null, cost: { ...x.cost, summary: { ...x.cost.summary, snapshotGbMonths: 0 } } });
const TWO = [
  { name: 'one', run: 'echo one > one.txt' },
  { name: 'two', run: 'echo two > two.txt' },
];
type Summary = { run: { id: string; state: string } };

describe('an imported run\'s snapshots belong to the store that exported it', { timeout: 600_000 }, () => {
  it('berth gc --keep 0 in the importing store, on the same engine, leaves the exporter\'s images: the exporter still forks its run, and the importer\'s own fork of the imported run works from the imported snapshot', async () => {
    fx = await planFixture(TWO);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const runId = lastJson<Summary>(end).run.id;
    const file = join(fx.dir, 'record.json');
    expect((await fx.cli(['export', runId, '--out', file])).code).toBe(0);
    const snaps = readRecord(file).isolation.snapshots;
    expect(snaps.length).toBeGreaterThanOrEqual(2);

    const other = join(fx.dir, 'other.db');
    expect((await cliOn(other, ['import', file])).code).toBe(0);
    // A fork of the imported run is this store's own run: it starts from the imported snapshot.
    const forked = await cliOn(other, ['fork', runId, '--at', 'one', '--json']);
    expect(forked.code, forked.stderr.slice(-800)).toBe(0);
    const fork = lastJson<Summary>(forked).run;
    expect(fork.state).toBe('completed');

    const gc = await cliOn(other, ['gc', '--keep', '0', '--json']);
    expect(gc.code, gc.stderr.slice(-800)).toBe(0);
    const pruned = lastJson<{ pruned: string[] }>(gc).pruned;
    const forkSnaps = await readStore(other, async (s) => (await s.listSnapshots({ runId: fork.id })).map((x) => x.id));
    expect(pruned.sort(), 'only the snapshots this store took').toEqual(forkSnaps.sort());
    for (const s of snaps) {
      const tagged = await fx.docker.getImage(`berth-snapshot:${s.id}`).inspect().then(() => true, () => false);
      expect(tagged, `the exporter's image of ${s.id} (${s.checkpoint})`).toBe(true);
    }
    // The imported record is as it was exported (nothing marked pruned), and still checks.
    const again = join(fx.dir, 'again.json');
    expect((await cliOn(other, ['export', runId, '--out', again])).code).toBe(0);
    expect(timeless(readRecord(again))).toEqual(timeless(readRecord(file)));
    expect(await invariantGuard().check(other)).toBeUndefined();

    const own = await fx.cli(['fork', runId, '--at', 'one', '--json']);
    expect(own.code, `the exporter's fork: ${own.stderr.slice(-800)}`).toBe(0);
    expect(lastJson<Summary>(own).run.state).toBe('completed');
  });

  it('a run and its fork import side by side (the fork\'s record carries its parent\'s snapshots), and a record whose ids the store already holds otherwise is refused as import_conflict naming them, with nothing written', async () => {
    fx = await planFixture(TWO);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const runId = lastJson<Summary>(end).run.id;
    const forked = await fx.cli(['fork', runId, '--at', 'one', '--json']);
    expect(forked.code, forked.stderr.slice(-800)).toBe(0);
    const forkId = lastJson<Summary>(forked).run.id;
    const [runFile, forkFile, laterForkFile] = ['run.json', 'fork.json', 'fork-later.json'].map((f) => join(fx!.dir, f)) as [string, string, string];
    expect((await fx.cli(['export', runId, '--out', runFile])).code).toBe(0);
    expect((await fx.cli(['export', forkId, '--out', forkFile])).code).toBe(0);
    const parentOwn = new Set(readRecord(runFile).isolation.snapshots.map((s) => s.id));
    const carried = readRecord(forkFile).isolation.snapshots.filter((s) => parentOwn.has(s.id)).map((s) => s.id);
    expect(carried.length, 'the fork\'s record holds its parent\'s snapshots up to the fork point').toBeGreaterThanOrEqual(1);

    const both = join(fx.dir, 'both.db');
    for (const f of [runFile, forkFile]) {
      const imp = await cliOn(both, ['import', f]);
      expect(imp.code, `import ${f}: ${imp.stderr}`).toBe(0);
    }
    expect((await cliOn(both, ['check', '--all'])).code).toBe(0);
    const again = join(fx.dir, 'fork-again.json');
    expect((await cliOn(both, ['export', forkId, '--out', again])).code).toBe(0);
    expect(timeless(readRecord(again))).toEqual(timeless(readRecord(forkFile)));

    // The exporter prunes the parent's snapshots; the fork exported now says so, the parent's earlier record does not.
    expect((await fx.cli(['gc', '--keep', '0'])).code).toBe(0);
    expect((await fx.cli(['export', forkId, '--out', laterForkFile])).code).toBe(0);
    const third = join(fx.dir, 'third.db');
    expect((await cliOn(third, ['import', runFile])).code).toBe(0);
    const refused = await cliOn(third, ['import', laterForkFile]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('import_conflict');
    for (const id of carried) expect(refused.stderr).toContain(id);
    expect(refused.stderr).not.toMatch(/UNIQUE|constraint/i);
    const held = await readStore(third, async (s) => ({ runs: (await s.listRuns()).map((r) => r.id), imported: (await s.listImportedRuns()).map((r) => r.runId), forkTasks: (await s.listTasks({ runId: forkId })).length }));
    expect(held).toEqual({ runs: [runId], imported: [runId], forkTasks: 0 });
  });

  it('imports a fork\'s record back into its parent\'s store, sharing the parent\'s own snapshots; a record the store already holds says so and what to do', async () => {
    fx = await planFixture(TWO);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const runId = lastJson<Summary>(end).run.id;
    const runFile = join(fx.dir, 'run.json');
    expect((await fx.cli(['export', runId, '--out', runFile])).code).toBe(0);
    // Another store imports the run and forks it; the fork comes back to the run's own store.
    const other = join(fx.dir, 'other.db');
    expect((await cliOn(other, ['import', runFile])).code).toBe(0);
    const forked = await cliOn(other, ['fork', runId, '--at', 'one', '--json']);
    expect(forked.code, forked.stderr.slice(-800)).toBe(0);
    const forkId = lastJson<Summary>(forked).run.id;
    const forkFile = join(fx.dir, 'fork.json');
    expect((await cliOn(other, ['export', forkId, '--out', forkFile])).code).toBe(0);

    const back = await fx.cli(['import', forkFile]);
    expect(back.code, back.stderr).toBe(0);
    const tree = await fx.cli(['tree', runId]);
    expect(tree.stdout).toContain(forkId);
    expect((await fx.cli(['check', '--all'])).code).toBe(0);
    const again = join(fx.dir, 'fork-again.json');
    expect((await fx.cli(['export', forkId, '--out', again])).code).toBe(0);
    expect(timeless(readRecord(again))).toEqual(timeless(readRecord(forkFile)));

    // Twice, or a run's record into the store it came from: already there, nothing to import.
    const twice = await fx.cli(['import', forkFile, '--json']);
    expect(twice.code).toBe(1);
    const err = JSON.parse(twice.stderr) as { error: { code: string; message: string; details: { already: string } } };
    expect(err.error).toMatchObject({ code: 'import_conflict', details: { already: 'imported' } });
    expect(err.error.message).toContain(`run ${forkId} is already in this store as an imported record`);
    const home = await fx.cli(['import', runFile]);
    expect(home.code).toBe(1);
    expect(home.stderr).toContain(`run ${runId} is already in this store as a live run`);
    expect(home.stderr).toContain(`berth show ${runId}`);
    expect(home.stderr).not.toContain('task_');
  });

  it('a fork imported without its parent can be forked again at any checkpoint of its history (before or at its own fork point), from the parent\'s snapshots its record carries', async () => {
    fx = await planFixture([...TWO, { name: 'three', run: 'cat one.txt two.txt > three.txt' }]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const runId = lastJson<Summary>(end).run.id;
    const forked = await fx.cli(['fork', runId, '--at', 'two', '--json']);
    expect(forked.code, forked.stderr.slice(-800)).toBe(0);
    const forkId = lastJson<Summary>(forked).run.id;
    const forkFile = join(fx.dir, 'fork.json');
    expect((await fx.cli(['export', forkId, '--out', forkFile])).code).toBe(0);

    const alone = join(fx.dir, 'alone.db');
    expect((await cliOn(alone, ['import', forkFile])).code).toBe(0);
    // Before: fork_invalid "run FORK has no snapshot after step one; forkable: <only the fork's own step:2:three>".
    for (const at of ['one', 'two', 'upload']) {
      const again = await cliOn(alone, ['fork', forkId, '--at', at, '--json']);
      expect(again.code, `--at ${at}: ${again.stderr.slice(-800)}`).toBe(0);
      expect(lastJson<Summary>(again).run.state).toBe('completed');
    }
    const bySnapshot = readRecord(forkFile).isolation.snapshots.find((s) => s.checkpoint.startsWith('step:0:'))!;
    const again = await cliOn(alone, ['fork', forkId, '--at', bySnapshot.id, '--json']);
    expect(again.code, again.stderr.slice(-800)).toBe(0);
    // The new forks' files are those of the history they started from.
    const ran = await readStore(alone, async (s) => (await s.listRuns()).filter((r) => r.id !== forkId).map((r) => r.state));
    expect(ran).toEqual(['completed', 'completed', 'completed', 'completed']);
    const tree = await cliOn(alone, ['tree', forkId]);
    expect(tree.code, tree.stderr).toBe(0);
    expect(await invariantGuard().check(alone)).toBeUndefined();
  });
});
