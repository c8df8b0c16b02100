import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { appendFileSync, chmodSync, readdirSync, readFileSync, statSync, writeFileSync, rmSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Run } from '../../host/model';
import { lastJson, planFixture, type PlanStepDef } from '../support/plan-fixture';
import { unrecordedSnapshotImages } from '../support/leak-check';

type Summary = { run: Run; reason: string; steps: Array<{ step: string; outcome: string; stdoutTail: string }> };
type Listed = { runId: string; artifacts: Array<{ path: string; step: string; size: number; sha256: string; status: string }> };

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
/** The default artifact store of the fixture's store: `artifacts/` beside the store file, content-addressed. */
const blob = (f: NonNullable<typeof fx>, sha: string) => join(f.dir, 'artifacts', 'sha256', sha);

async function killAfterStep(f: NonNullable<typeof fx>, n: number): Promise<string> {
  const first = await f.cli(['run', f.plan, '--json'], { BERTH_FAULT: `after:phase.complete:plan-step#${n}` });
  expect(first.signal, first.stderr).toBe('SIGKILL');
  return f.read(async (s) => (await s.listRuns())[0]!.id);
}

async function listed(f: NonNullable<typeof fx>, runId: string): Promise<Listed> {
  const end = await f.cli(['artifacts', runId, '--json']);
  expect(end.code, end.stderr).toBe(0);
  return lastJson<Listed>(end);
}

const confirmedSteps = async (f: NonNullable<typeof fx>, runId: string) =>
  (await f.read((s) => s.listEffects({ runId }))).filter((e) => e.status === 'confirmed').map((e) => (e.intent as { step: string }).step).sort();

describe('step artifacts are copied out, committed with their digests and fetched intact', { timeout: 300_000 }, () => {
  it('berth artifacts lists what a step declared and fetches it with the digests it was committed with', async () => {
    fx = await planFixture([
      { name: 'build', run: 'mkdir -p out/sub && head -c 300000 /dev/urandom > out/lib.a && echo hi > out/sub/notes.txt && echo no > other.txt', artifacts: ['out/**'] },
      { name: 'test', run: 'cat out/sub/notes.txt' },
    ]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const runId = lastJson<Summary>(end).run.id;
    const list = await listed(fx, runId);
    expect(list.artifacts.map((a) => a.path).sort()).toEqual(['out/lib.a', 'out/sub/notes.txt']);
    expect(list.artifacts.every((a) => a.status === 'present' && a.step === 'build')).toBe(true);
    const notes = list.artifacts.find((a) => a.path === 'out/sub/notes.txt')!;
    expect(notes.sha256).toBe(sha256('hi\n'));
    expect(notes.size).toBe(3);

    const out = join(fx.dir, 'fetched');
    const fetched = await fx.cli(['artifacts', runId, '--out', out, '--json']);
    expect(fetched.code, fetched.stderr).toBe(0);
    for (const a of list.artifacts) {
      const bytes = readFileSync(join(out, a.path));
      expect(sha256(bytes)).toBe(a.sha256);
      expect(bytes.length).toBe(a.size);
    }
    expect(existsSync(join(out, 'other.txt'))).toBe(false);
  });

  it('berth artifacts --out gives each fetched file the mode it had in the sandbox, so a fetched test binary runs', async () => {
    fx = await planFixture([
      {
        name: 'build',
        run: "mkdir -p out && printf '#!/bin/sh\\necho tests passed\\n' > out/run-tests && chmod 755 out/run-tests && echo data > out/data.txt && chmod 640 out/data.txt",
        artifacts: ['out/*'],
      },
    ]);
    // No snapshot is needed here; the run is about the artifact records alone.
    appendFileSync(join(fx.dir, 'env.yaml'), 'snapshot: { policy: never }\n');
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const runId = lastJson<Summary>(end).run.id;
    const out = join(fx.dir, 'fetched');
    const fetched = await fx.cli(['artifacts', runId, '--out', out, '--json']);
    expect(fetched.code, fetched.stderr).toBe(0);
    expect(statSync(join(out, 'out/run-tests')).mode & 0o777).toBe(0o755);
    expect(statSync(join(out, 'out/data.txt')).mode & 0o777).toBe(0o640);
    expect(execFileSync(join(out, 'out/run-tests'), { encoding: 'utf8' })).toBe('tests passed\n');
    // The mode is part of the record: listed, and exported with the artifact.
    const modes = Object.fromEntries((await fx.read((s) => s.listArtifacts(runId))).map((a) => [a.path, a.mode]));
    expect(modes).toEqual({ 'out/data.txt': 0o640, 'out/run-tests': 0o755 });
  });

  it('an artifact deleted from the store while the host is down re-runs its safe producing step on resume', async () => {
    fx = await planFixture([
      { name: 'one', run: 'echo one > a.txt', artifacts: ['a.txt'] },
      { name: 'two', run: 'echo two > b.txt', artifacts: ['b.txt'] },
      { name: 'three', run: 'cat a.txt b.txt' },
    ]);
    const runId = await killAfterStep(fx, 2);
    const a = (await listed(fx, runId)).artifacts.find((x) => x.path === 'a.txt')!;
    rmSync(blob(fx, a.sha256));
    expect((await listed(fx, runId)).artifacts.find((x) => x.path === 'a.txt')!.status).toBe('missing');

    const end = await fx.cli(['resume', runId, '--json']);
    expect(end.code, end.stderr).toBe(0);
    expect(lastJson<Summary>(end).run.state).toBe('completed');
    // Step one ran again (from the upload snapshot) and so did two after it; three ran once.
    expect(await confirmedSteps(fx, runId)).toEqual(['one', 'one', 'three', 'two', 'two']);
    const after = await listed(fx, runId);
    expect(after.artifacts.map((x) => [x.path, x.status]).sort()).toEqual([['a.txt', 'present'], ['b.txt', 'present']]);
    expect(readFileSync(blob(fx, a.sha256), 'utf8')).toBe('one\n');
    const shown = await fx.cli(['logs', runId]);
    expect(shown.stdout).toContain('artifacts a.txt of step one (missing): re-ran from step 1');
  });

  it('a host killed after the copy but before the step committed commits the artifacts once on resume', async () => {
    fx = await planFixture([
      { name: 'build', run: 'mkdir -p out && echo lib > out/lib.a', artifacts: ['out/*'] },
      { name: 'test', run: 'cat out/lib.a' },
    ]);
    const first = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: 'before:phase.complete:plan-step#1' });
    expect(first.signal, first.stderr).toBe('SIGKILL');
    fx.allowLeftovers('the kill before the step commit leaves its snapshot image whose record never commits; `berth gc` removes it after its grace period', unrecordedSnapshotImages);
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    expect(await fx.read((s) => s.listArtifacts(runId))).toEqual([]);
    const end = await fx.cli(['resume', runId, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const records = await fx.read((s) => s.listArtifacts(runId));
    expect(records.map((r) => [r.path, r.sha256])).toEqual([['out/lib.a', sha256('lib\n')]]);
    expect(await confirmedSteps(fx, runId)).toEqual(['build', 'test']);
    expect(readdirSync(join(fx.dir, 'artifacts', 'sha256'))).toEqual([sha256('lib\n')]);
  });

  it('an artifact altered in the store for a replay-never step parks the run naming the artifact', async () => {
    fx = await planFixture([
      { name: 'one', run: 'echo one > a.txt' },
      { name: 'deploy', run: 'echo released > release.txt', replay: 'never', artifacts: ['release.txt'] },
      { name: 'three', run: 'ls' },
    ]);
    const runId = await killAfterStep(fx, 2);
    const r = (await listed(fx, runId)).artifacts.find((x) => x.path === 'release.txt')!;
    chmodSync(blob(fx, r.sha256), 0o644);
    writeFileSync(blob(fx, r.sha256), 'tampered\n');
    expect((await listed(fx, runId)).artifacts[0]!.status).toBe('altered');

    const end = await fx.cli(['resume', runId, '--json']);
    expect(end.code, end.stderr).toBe(3);
    const summary = lastJson<Summary>(end);
    expect(summary.run.state).toBe('needs_reconciliation');
    expect(summary.reason).toContain('release.txt');
    expect(summary.reason).toContain('deploy');
    expect(summary.reason).toMatch(/replay never/);
    expect(await confirmedSteps(fx, runId)).toEqual(['deploy', 'one']);

    // The operator continues without it: the decision waives that artifact, so the run is not parked again for it.
    const decided = await fx.cli(['reconcile', runId, '--accept', '--json']);
    expect(decided.code, decided.stderr).toBe(0);
    expect(await confirmedSteps(fx, runId)).toEqual(['deploy', 'one', 'three']);
    expect((await listed(fx, runId)).artifacts[0]!.status).toBe('altered');
  });
});

describe('artifact paths stay in the workspace and within limits', { timeout: 300_000 }, () => {
  const failing = async (steps: PlanStepDef[], planExtra = '') => {
    fx = await planFixture(steps);
    if (planExtra) appendFileSync(fx.plan, planExtra);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(1);
    const summary = lastJson<Summary>(end);
    expect(summary.run.state).toBe('failed');
    return summary.reason;
  };
  const storedBlobs = () => (existsSync(join(fx!.dir, 'artifacts', 'sha256')) ? readdirSync(join(fx!.dir, 'artifacts', 'sha256')) : []);

  it('refuses a symlink matched by the glob that points outside the workspace, naming it', async () => {
    const reason = await failing([{ name: 'build', run: 'mkdir out && echo ok > out/ok.txt && ln -s /etc/passwd out/passwd', artifacts: ['out/*'] }]);
    expect(reason).toContain('out/passwd');
    expect(reason).toMatch(/outside the workspace/);
    const passwd = sha256(readFileSync('/etc/passwd'));
    expect(storedBlobs()).not.toContain(passwd);
  });

  it('refuses a glob under a symlinked directory that leads outside the workspace', async () => {
    const reason = await failing([{ name: 'build', run: 'ln -s /etc conf', artifacts: ['conf/*'] }]);
    expect(reason).toContain('conf');
    expect(reason).toMatch(/outside the workspace/);
    expect(storedBlobs()).toEqual([]);
  });

  it('refuses more files than the plan allows, naming the glob', async () => {
    const reason = await failing([{ name: 'build', run: 'mkdir out && touch out/a out/b out/c', artifacts: ['out/*'] }], 'artifactLimits: { files: 2 }\n');
    expect(reason).toContain('out/*');
    expect(reason).toMatch(/more than 2 files/);
    expect(storedBlobs()).toEqual([]);
  });

  it('refuses more bytes than the plan allows, naming the path', async () => {
    const reason = await failing([{ name: 'build', run: 'head -c 2000000 /dev/zero > big.bin', artifacts: ['*.bin'] }], 'artifactLimits: { mb: 1 }\n');
    expect(reason).toContain('big.bin');
    expect(reason).toMatch(/1 MB/);
    expect(storedBlobs()).toEqual([]);
  });

  it('refuses a glob that climbs out of the workspace before the run starts', async () => {
    fx = await planFixture([{ name: 'build', run: 'true', artifacts: ['../etc/*'] }]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code).not.toBe(0);
    expect(end.stdout + end.stderr).toContain('../etc/*');
    expect(end.stdout + end.stderr).toMatch(/inside the workspace/);
    expect(await fx.read((s) => s.listRuns())).toEqual([]);
  });
});

describe('artifacts never carry a secret value into the store', { timeout: 300_000 }, () => {
  it('refuses an artifact holding a secret in base64, even one allowed in the workspace, and stores no byte of it', async () => {
    const token = `tok-${Math.random().toString(36).slice(2)}-${Date.now().toString(36)}-artifact`;
    fx = await planFixture([]);
    appendFileSync(join(fx.dir, 'env.yaml'), 'secrets:\n  - { name: TOKEN, from: { env: BERTH_TEST_TOKEN }, expose: env, to: [build], allowInWorkspace: true }\n');
    writeFileSync(
      fx.plan,
      `name: secret-artifact\nenvironment: env.yaml\nworkspace: ws\nsteps:\n  - name: build\n    run: ${JSON.stringify('mkdir out && echo fine > out/ok.txt && printf %s "$TOKEN" | busybox base64 > out/token.b64')}\n    secrets: [TOKEN]\n    artifacts: ["out/*"]\n`,
    );
    const end = await fx.cli(['run', fx.plan, '--json'], { BERTH_TEST_TOKEN: token });
    expect(end.code, end.stderr).toBe(1);
    const summary = lastJson<Summary>(end);
    expect(summary.run.state).toBe('failed');
    expect(summary.reason).toContain('out/token.b64');
    expect(summary.reason).toContain('TOKEN');
    const dir = join(fx.dir, 'artifacts');
    const all = (d: string): string[] => (existsSync(d) ? readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? all(join(d, e.name)) : [join(d, e.name)])) : []);
    expect(all(dir)).toEqual([]);
  });
});
