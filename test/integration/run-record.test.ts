import { createHash } from 'node:crypto';
import { appendFileSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { checkRecord, RunRecordSchema, type RunRecord } from '../../host/record';
import { runNode } from '../support/child';
import { bundledCli, lastJson, planFixture } from '../support/plan-fixture';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

/** The record, read from the file alone (as someone without Berth would: JSON.parse, nothing else). */
const readRecord = (file: string): RunRecord => RunRecordSchema.parse(JSON.parse(readFileSync(file, 'utf8')));

/** `berth` against another store than the fixture's. */
async function cliOn(store: string, args: string[]) {
  return runNode(await bundledCli(), [...args, '--store', store], { BERTH_HOST_ID: `other-${process.pid}`, BERTH_OPERATOR: 'tester' });
}

describe('the run record: export, import, check', { timeout: 240_000 }, () => {
  it('answers what a completed plan run was asked, did and which snapshot to restore, from the exported file alone', async () => {
    fx = await planFixture([
      { name: 'build', run: 'echo built > out.txt' },
      { name: 'publish', run: 'cat out.txt', replay: 'never' },
    ]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    // A destination that cannot be written is named, as a typed error, before any row is read; nothing is left behind.
    const nowhere = join(fx.dir, 'missing-dir', 'record.json');
    const bad = await fx.cli(['export', runId, '--out', nowhere, '--json']);
    expect(bad.code, bad.stderr).toBe(1);
    const err = (JSON.parse(bad.stderr) as { error: { code: string; message: string; retryable: boolean } }).error;
    expect(err).toMatchObject({ code: 'output_unwritable', retryable: false });
    expect(err.message).toContain(nowhere);
    expect(err.message).toContain(`its directory ${join(fx.dir, 'missing-dir')} does not exist`);
    expect(readdirSync(fx.dir).filter((f) => f.includes('.partial-'))).toEqual([]);
    // A directory as --out: said as such before the record is written. Before: the rename over the
    // directory failed at the end and a second close of the file hid it ("internal error: EBADF").
    const asDir = await fx.cli(['export', runId, '--out', fx.dir, '--json']);
    expect(asDir.code, asDir.stderr).toBe(1);
    expect((JSON.parse(asDir.stderr) as { error: { code: string; message: string } }).error).toMatchObject({ code: 'output_unwritable', message: `cannot write the record to ${fx.dir}: it is a directory; name a file, such as ${join(fx.dir, `${runId}.json`)}` });
    expect(readdirSync(fx.dir).filter((f) => f.includes('.partial-'))).toEqual([]);
    const file = join(fx.dir, 'record.json');
    const ex = await fx.cli(['export', runId, '--out', file, '--json']);
    expect(ex.code, ex.stderr).toBe(0);

    const r = readRecord(file);
    // what it was asked
    expect(r.job.objective).toMatchObject({ steps: [{ name: 'build', replay: 'safe' }, { name: 'publish', replay: 'never' }] });
    expect(r.job.requestId).toBeTruthy();
    // what it did
    expect(r.run.state).toBe('completed');
    expect(r.transitions.map((t) => t.to)).toEqual(['admitted', 'running', 'completed']);
    expect(r.effects.map((e) => [e.intent, e.status, e.reconciliation])).toEqual([
      [{ step: 'build', run: 'echo built > out.txt' }, 'confirmed', 'receipt'],
      [{ step: 'publish', run: 'cat out.txt' }, 'confirmed', 'receipt'],
    ]);
    // nothing uncertain; completion is not acceptance
    expect(r.unresolved).toEqual([]);
    expect(r.job.acceptanceRule).toEqual({ kind: 'manual' });
    expect(r.acceptance).toEqual({ verdict: 'pending', decisions: [] });
    // which snapshot to restore: the newest one, tied to the last step's checkpoint
    expect(r.isolation.snapshots.at(-1)!.checkpoint).toMatch(/^step:1:/);
    expect(r.isolation.leases.every((l) => l.releasedAt !== null)).toBe(true);
    expect(r.run.versions.imageDigest).toMatch(/^sha256:/);
    expect(r.checkpoint.lastCommittedTransition).toBe(3);
  });

  it('imports into a fresh store where check passes and show prints the same; a flipped byte is refused, and the imported run is never driven', async () => {
    fx = await planFixture([{ name: 'fails', run: 'echo nope >&2; exit 3' }]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code).toBe(1);
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const file = join(fx.dir, 'record.json');
    expect((await fx.cli(['export', runId, '--out', file])).code).toBe(0);

    // failed run, answered from the file: which step failed and how
    const r = readRecord(file);
    expect(r.run.state).toBe('failed');
    const step = r.tasks.find((t) => t.kind === 'plan-step')!;
    expect(step.error).toMatchObject({ code: 'step_failed', details: { step: 'fails', exitCode: 3, stderrTail: 'nope\n' } });
    expect(r.transitions.at(-1)!.reason).not.toBe('');

    const other = join(fx.dir, 'other.db');
    const imp = await cliOn(other, ['import', file, '--json']);
    expect(imp.code, imp.stderr).toBe(0);
    expect(lastJson<{ runId: string }>(imp).runId).toBe(runId);
    const check = await cliOn(other, ['check', runId, '--json']);
    expect(check.code, check.stdout + check.stderr).toBe(0);
    expect(lastJson<{ violations: unknown[] }>(check).violations).toEqual([]);

    // (the header says where the run is driven; kept snapshots' GB-months grow with the clock)
    // The lease's container column is what the viewing host's engine holds (live, not the record): absent on both, said from each side.
    const strip = (text: string) =>
      text.replace(/^run (\S+) \((\w+)\) .*$/m, 'run $1 ($2)').replace(/\(\S+ GB-months\)/, '(GB-months)').replace(/container gone|no container on this engine \(host \S+\)/g, 'container absent');
    const shownHere = await fx.cli(['show', runId]);
    const shownThere = await cliOn(other, ['show', runId]);
    expect(shownThere.code, shownThere.stderr).toBe(0);
    expect(strip(shownThere.stdout)).toBe(strip(shownHere.stdout));
    expect(shownThere.stdout.split('\n')[0]).toBe(`run ${runId} (plan) failed, imported record (read-only; ${r.digest})`);
    // a re-export from the imported store carries the same content (only the export time and origin differ)
    const again = join(fx.dir, 'again.json');
    expect((await cliOn(other, ['export', runId, '--out', again])).code).toBe(0);
    const r2 = readRecord(again);
    const timeless = (x: RunRecord) => ({ ...x, digest: '', exportedAt: 0, source: null, cost: { ...x.cost, summary: { ...x.cost.summary, snapshotGbMonths: 0 } } });
    expect(timeless(r2)).toEqual(timeless(r));

    // never driven
    for (const args of [['resume', runId], ['cancel', runId], ['reconcile', runId, '--fail']]) {
      const refused = await cliOn(other, args);
      expect(refused.code, args.join(' ')).toBe(1);
      expect(refused.stderr).toContain('run_imported');
    }

    // a record changed in the store (not through a commit) fails check, naming the invariant and its evidence
    const db = new Database(other);
    db.prepare("UPDATE run_transitions SET from_state = 'admitted' WHERE run_id = ? AND n = 3").run(runId);
    db.close();
    const broken = await cliOn(other, ['check', '--all']);
    expect(broken.code).toBe(1);
    expect(broken.stdout).toContain(`legal_transitions: ${runId}: transition #3 admitted -> `);
    expect(broken.stdout).toContain('evidence: {"n":3,"from":"admitted"');
    expect(broken.stderr).toContain('legal_transitions');

    // a flipped byte (inside a value, so the file stays JSON) is refused by digest
    const text = readFileSync(file, 'utf8');
    const at = text.indexOf('"exitCode":3') + '"exitCode":'.length;
    expect(at).toBeGreaterThan(20);
    const tampered = join(fx.dir, 'tampered.json');
    writeFileSync(tampered, text.slice(0, at) + '0' + text.slice(at + 1));
    const refused = await cliOn(join(fx.dir, 'third.db'), ['import', tampered]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('record_digest_mismatch');
    // an unknown schema version is refused before anything else
    const future = join(fx.dir, 'future.json');
    writeFileSync(future, text.replace('"schemaVersion":1', '"schemaVersion":2'));
    const unknown = await cliOn(join(fx.dir, 'fourth.db'), ['import', future]);
    expect(unknown.stderr).toContain('record_version_unknown');
  });

  it('answers from the exported file alone which artifacts a run produced, its acceptance verdict with evidence and its cost; imported elsewhere, show prints the same acceptance, cost and artifacts', async () => {
    fx = await planFixture([
      // a little CPU, so the cost has CPU-seconds to show
      { name: 'build', run: 'i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done; mkdir -p out && echo built > out/a.txt', artifacts: ['out/**'] },
    ]);
    appendFileSync(fx.plan, 'acceptance:\n  command: "grep -q built out/a.txt"\n');
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    // an operator overrules the command afterwards: both decisions stay on the record
    const rejected = await fx.cli(['reject', runId, '--reason', 'not shipped', '--request-id', 'req-rej', '--json']);
    expect(rejected.code, rejected.stderr).toBe(0);
    const file = join(fx.dir, 'record.json');
    expect((await fx.cli(['export', runId, '--out', file])).code).toBe(0);

    const r = readRecord(file);
    // which artifacts, with their digests
    expect(r.artifacts).toEqual([expect.objectContaining({ step: 'build', path: 'out/a.txt', sizeBytes: 6, sha256: createHash('sha256').update('built\n').digest('hex') })]);
    // the rule, the verdict and its evidence; the run stays completed
    expect(r.job.acceptanceRule).toEqual({ kind: 'command', command: 'grep -q built out/a.txt', replay: 'safe', timeoutS: null });
    expect(r.run.state).toBe('completed');
    expect(r.acceptance.verdict).toBe('rejected');
    expect(r.acceptance.decisions.map((d) => [d.actor, d.decision, d.reason])).toEqual([['acceptance-command', 'accepted', null], ['user:tester', 'rejected', 'not shipped']]);
    expect(r.acceptance.decisions[0]!.evidence).toMatchObject({ command: 'grep -q built out/a.txt', exitCode: 0, timedOut: false, outputDigest: expect.stringMatching(/^sha256:[0-9a-f]{64}$/) });
    // the cost: CPU-seconds measured, summing the recorded samples; no model, so no tokens
    const cpuSamples = r.cost.samples.filter((c) => c.meter === 'cpu.usec').reduce((n, c) => n + c.amount, 0);
    expect(cpuSamples).toBeGreaterThan(0);
    expect(r.cost.summary.cpuSeconds).toBeCloseTo(cpuSamples / 1e6, 6);
    expect(r.cost.summary.execs).toBe(2);
    expect(r.cost.summary.tokens).toEqual({});
    expect(checkRecord(r)).toEqual([]);

    const other = join(fx.dir, 'other.db');
    const imp = await cliOn(other, ['import', file, '--json']);
    expect(imp.code, imp.stderr).toBe(0);
    type Shown = { acceptance: unknown; cost: Record<string, unknown> };
    const here = lastJson<Shown>(await fx.cli(['show', runId, '--json']));
    const there = lastJson<Shown>(await cliOn(other, ['show', runId, '--json']));
    expect(there.acceptance).toEqual(here.acceptance);
    // (kept snapshots' GB-months grow with the clock; everything else is fixed once the run ended)
    const fixed = ({ snapshotGbMonths: _g, ...c }: Record<string, unknown>) => c;
    expect(fixed(there.cost)).toEqual(fixed(here.cost));
    expect(there.cost.cpuSeconds).toBeGreaterThan(0);
    type Listed = { artifacts: Array<{ path: string; step: string; size: number; sha256: string }> };
    const listed = (l: Listed) => l.artifacts.map(({ path, step, size, sha256 }) => ({ path, step, size, sha256 }));
    const artHere = lastJson<Listed>(await fx.cli(['artifacts', runId, '--json']));
    const artThere = lastJson<Listed>(await cliOn(other, ['artifacts', runId, '--json']));
    expect(listed(artThere)).toEqual(listed(artHere));
    expect(listed(artThere)).toHaveLength(1);
    const check = await cliOn(other, ['check', runId, '--json']);
    expect(check.code, check.stdout + check.stderr).toBe(0);
  });

  it('says when the run exported has not ended: the file is the run as it stands, not its end', async () => {
    fx = await planFixture([{ name: 'one', run: 'true' }]);
    const sub = await fx.cli(['run', fx.plan, '--detach', '--json']);
    expect(sub.code, sub.stderr).toBe(0);
    const runId = lastJson<{ runId: string }>(sub).runId;
    const out = join(fx.dir, 'admitted.json');
    const text = await fx.cli(['export', runId, '--out', out]);
    expect(text.code, text.stderr).toBe(0);
    // Before: only "exported run RUN to FILE (sha256:...)", as for a run that had ended.
    expect(text.stdout).toContain('; the run is admitted, not ended: the record is as it stands now (export it again once it ends)');
    const json = await fx.cli(['export', runId, '--out', out, '--json']);
    expect(lastJson(json)).toMatchObject({ runId, state: 'admitted', final: false });
    const ended = await fx.cli(['resume', runId]);
    expect(ended.code, ended.stderr).toBe(0);
    const after = await fx.cli(['export', runId, '--out', out, '--json']);
    expect(lastJson(after)).toMatchObject({ runId, state: 'completed', final: true });
  });
});
