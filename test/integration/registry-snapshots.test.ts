import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Run } from '../../host/model';
import pino from 'pino';
import { pullImage, pushImage, registryEngine } from '../../host/sandbox/registry';
import { SnapshotTransport } from '../../host/snapshot';
import { openSqliteStore } from '../../host/store';
import type { Snapshot } from '../../host/model';
import { freePort } from '../support/registry';
import { bundledCli, planFixture, lastJson, removeHostArtifacts } from '../support/plan-fixture';
import { runNode } from '../support/child';
import { requireEngine, requireTinyImage } from '../support/docker-engine';
import { startModelServer } from '../support/model-server';
import { manifestLayers, startRegistry, type TestRegistry } from '../support/registry';
import { startSecondEngine, type SecondEngine } from '../support/second-engine';
import { expectNoLeaks, registryStorage, storeFiles } from '../support/secret-scan';
import { sharedPostgres, stopSharedPostgres } from '../support/store-kinds';
import { readStore } from '../support/temp-store';

type Summary = { run: Run; reason: string };

const TOKEN = 'tok-4f9c2a7e1b6d8035c1e2';
// A registry login in the Docker client configuration: handed to the engine, never stored or logged.
const REGISTRY_PASSWORD = 'pw-registry-9d41c7aa02';
// Each step appends its name to a log in the workspace: a step that ran twice shows up twice.
const STEPS = [
  { name: 'one', run: 'echo one >> steps.log && mkdir -p out && echo 1 > out/a' },
  { name: 'two', run: 'echo two >> steps.log && head -c 20000 /dev/zero > out/b && echo "$TOKEN" | sha256sum > out/token.sha' },
  { name: 'three', run: 'echo three >> steps.log && cat steps.log > out/c' },
];
const SECRETS_YAML = 'secrets:\n  - { name: TOKEN, from: { env: BERTH_TEST_TOKEN }, expose: env, to: [two] }\n';

let registry: TestRegistry;
let engineB: SecondEngine;
let fx: Awaited<ReturnType<typeof planFixture>> | undefined;

beforeAll(async () => {
  registry = await startRegistry();
  engineB = await startSecondEngine('b');
}, 120_000);
afterAll(async () => {
  await engineB?.stop();
  await registry?.stop();
  await stopSharedPostgres();
}, 120_000);
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

/** A plan fixture whose step `two` gets TOKEN, optionally with extra `snapshot:` settings. */
async function fixture(snapshotYaml = '', opts: { store?: string } = {}) {
  fx = await planFixture([], undefined, opts);
  const envFile = `${fx.dir}/env.yaml`;
  writeFileSync(envFile, readFileSync(envFile, 'utf8') + SECRETS_YAML + snapshotYaml);
  const steps = STEPS.map((s) => `  - name: ${s.name}\n    run: ${JSON.stringify(s.run)}\n    replay: safe${s.name === 'two' ? '\n    secrets: [TOKEN]' : ''}`).join('\n');
  writeFileSync(fx.plan, `name: fixture\nenvironment: env.yaml\nworkspace: ws\nsteps:\n${steps}\n`);
  return fx;
}

/** The final workspace digest of an uninterrupted run on the main engine, no registry. */
async function uninterruptedDigest(): Promise<string> {
  const base = await fixture();
  const end = await base.cli(['run', base.plan, '--json'], { BERTH_TEST_TOKEN: TOKEN });
  expect(end.code, end.stderr).toBe(0);
  const digest = await base.read(async (s) => (await s.listSnapshots({})).at(-1)!.workspaceDigest);
  await base.cleanup();
  fx = undefined;
  return digest;
}

const onB = () => ({ DOCKER_HOST: engineB.dockerHost, BERTH_REGISTRY: registry.address, BERTH_TEST_TOKEN: TOKEN });

/** Every byte of the store: the SQLite files, or every row of every table of the PostgreSQL database, as text. */
async function storeContents(store: string): Promise<Array<[string, Buffer]>> {
  if (!store.startsWith('postgres://')) return storeFiles(store);
  const pg = await sharedPostgres();
  const db = new URL(store).pathname.slice(1);
  const tables = await pg.sql<{ table_name: string }>("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'", [], db);
  expect(tables.length).toBeGreaterThan(5);
  const out: Array<[string, Buffer]> = [];
  for (const { table_name } of tables) {
    const rows = await pg.sql<{ r: string }>(`SELECT t::text AS r FROM "${table_name}" t`, [], db);
    out.push([`postgres table ${table_name}`, Buffer.from(rows.map((x) => x.r).join('\n'))]);
  }
  return out;
}

/**
 * The plan killed on engine A after its second step, engine A stopped, `berth resume` on engine B
 * (a SQLite file, or a PostgreSQL database when `store` is its URL: the store is all the hosts share
 * besides the registry).
 */
async function killedOnAResumedOnB(store?: string): Promise<void> {
  const expected = await uninterruptedDigest();
  const engineA = await startSecondEngine('a');
  try {
    // Engine A gets the base image from the registry (it has no images of its own).
    const main = (await fixture('', store ? { store } : {})).docker;
    const tiny = (await main.getImage('berth/tiny:latest').inspect()).Id;
    const base = await pushImage(main, tiny, `${registry.address}/berth-base`, 'tiny');
    await pullImage(engineA.docker, base.ref, tiny, { tag: { repo: 'berth/tiny', tag: 'latest' } });

    mkdirSync(join(fx!.dir, 'docker-config'));
    writeFileSync(join(fx!.dir, 'docker-config', 'config.json'), JSON.stringify({ auths: { [registry.address]: { auth: Buffer.from(`berth:${REGISTRY_PASSWORD}`).toString('base64') } } }));
    const login = { DOCKER_CONFIG: join(fx!.dir, 'docker-config'), BERTH_LOG_LEVEL: 'debug' };
    const first = await fx!.cli(['run', fx!.plan, '--json'], { DOCKER_HOST: engineA.dockerHost, BERTH_REGISTRY: registry.address, BERTH_TEST_TOKEN: TOKEN, BERTH_FAULT: 'after:phase.complete:plan-step#2', ...login });
    expect(first.signal, first.stderr).toBe('SIGKILL');
    const runId = await fx!.read(async (s) => (await s.listRuns())[0]!.id);
    const before = await fx!.read((s) => s.listSnapshots({ runId }));
    // sync (the default): every committed snapshot names its manifest in the registry.
    expect(before.length).toBeGreaterThan(0);
    for (const s of before) expect(s.registryRef).toMatch(new RegExp(`^${registry.address.replace(/\./g, '\\.')}/berth-snapshot@sha256:[0-9a-f]{64}$`));
    await engineA.stop();

    const end = await fx!.cli(['resume', runId, '--json'], { ...onB(), ...login });
    expect(end.code, end.stderr).toBe(0);
    expect(lastJson<Summary>(end).run.state).toBe('completed');
    expectNoLeaks([['first host output', Buffer.from(first.stdout + first.stderr)], ['resuming host output', Buffer.from(end.stdout + end.stderr)], ...(await storeContents(fx!.store))], [TOKEN, REGISTRY_PASSWORD]);
    const snaps = await fx!.read((s) => s.listSnapshots({ runId }));
    expect(snaps.at(-1)!.workspaceDigest).toBe(expected);
    // Steps one and two finished before the kill: neither ran again on B.
    const effects = await fx!.read((s) => s.listEffects({ runId }));
    expect(effects.map((e) => e.attempts)).toEqual([1, 1, 1]);
    expect((await engineB.docker.listImages()).some((i) => i.Id === before.at(-1)!.imageId)).toBe(true);
    expectNoLeaks(registryStorage(registry.files()), [TOKEN, REGISTRY_PASSWORD]);
  } finally {
    await engineA.stop();
  }
}

describe('snapshots travel through an OCI registry to another engine', { timeout: 300_000 }, () => {
  it('a plan run killed on engine A, with engine A stopped, resumes on engine B from the registry and ends with the uninterrupted workspace; the registry holds no secret', async () => {
    await killedOnAResumedOnB();
  });

  it('the same on a PostgreSQL store: killed on engine A, resumed on engine B from the registry, it ends with the uninterrupted workspace and no step ran twice', async () => {
    await killedOnAResumedOnB(await (await sharedPostgres()).createStoreDatabase('registry'));
  });

  it('a snapshot whose blob is gone from the registry needs reconciliation naming it and the registry; restoring an older one finishes', async () => {
    const expected = await uninterruptedDigest();
    const fx = await fixture();
    const first = await fx.cli(['run', fx.plan, '--json'], { BERTH_REGISTRY: registry.address, BERTH_TEST_TOKEN: TOKEN, BERTH_FAULT: 'after:phase.complete:plan-step#2' });
    expect(first.signal, first.stderr).toBe('SIGKILL');
    fx.allowLeftovers('engine A (the main engine) keeps the killed host\'s container; the run moved to engine B');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const snaps = await fx.read((s) => s.listSnapshots({ runId }));
    const newest = snaps.at(-1)!;
    expect(newest.checkpoint).toBe('step:1:two');
    const layers = await manifestLayers(registry.address, 'berth-snapshot', newest.registryRef!.split('@')[1]!);
    registry.deleteBlob(layers.at(-1)!);

    const parked = await fx.cli(['resume', runId, '--json'], onB());
    expect(parked.code, parked.stderr).toBe(3);
    const summary = lastJson<Summary>(parked);
    expect(summary.run.state).toBe('needs_reconciliation');
    expect(summary.reason).toContain(newest.id);
    expect(summary.reason).toContain(registry.address);

    const older = snaps.find((s) => s.checkpoint === 'step:0:one')!;
    const done = await fx.cli(['reconcile', runId, '--restore', older.id, '--json'], onB());
    expect(done.code, done.stderr).toBe(0);
    expect(lastJson<Summary>(done).run.state).toBe('completed');
    const final = await fx.read(async (s) => (await s.listSnapshots({ runId })).at(-1)!);
    expect(final.workspaceDigest).toBe(expected);
  });

  it('base images travel too: a host killed before its first snapshot committed resumes on engine B, which never had the base image, and finishes', async () => {
    const expected = await uninterruptedDigest();
    const fx = await fixture();
    const first = await fx.cli(['run', fx.plan, '--json'], { BERTH_REGISTRY: registry.address, BERTH_TEST_TOKEN: TOKEN, BERTH_FAULT: 'after:snapshot.take#1' });
    expect(first.signal, first.stderr).toBe('SIGKILL');
    fx.allowLeftovers('engine A (the main engine) keeps the killed host\'s container and its unrecorded snapshot; the run moved to engine B');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    expect(await fx.read((s) => s.listSnapshots({ runId }))).toEqual([]);
    const tiny = (await fx.docker.getImage('berth/tiny:latest').inspect()).Id;
    expect((await engineB.docker.listImages()).some((i) => i.Id === tiny)).toBe(false);

    const end = await fx.cli(['resume', runId, '--json'], onB());
    expect(end.code, end.stderr).toBe(0);
    expect(lastJson<Summary>(end).run.state).toBe('completed');
    const final = await fx.read(async (s) => (await s.listSnapshots({ runId })).at(-1)!);
    expect(final.workspaceDigest).toBe(expected);
    // Pulled and verified by id: the same image id as the engine that built it.
    expect((await engineB.docker.listImages()).some((i) => i.Id === tiny)).toBe(true);
  });

  it('an unreachable registry is a retryable error naming the snapshot and the registry, a missing manifest a reconciliation', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-registry-unit-'));
    const store = openSqliteStore(join(dir, 'berth.db'));
    try {
      const transport = new SnapshotTransport({ registry: registryEngine(engineB.docker), store, logger: pino({ level: 'silent' }) });
      const dead = `127.0.0.1:${await freePort()}`;
      const snap = (ref: string): Snapshot => ({ id: 'snap_x', sessionId: 's', runId: 'r', taskId: null, leaseId: 'l', imageId: `sha256:${'a'.repeat(64)}`, workspaceDigest: 'd', sizeBytes: 0, checkpoint: 'step:0:one', parentId: null, commitSeq: 1, createdAt: 0, prunedAt: null, registryRef: ref, pushedAt: 1 });
      const err = await transport.fetch(snap(`${dead}/berth-snapshot@sha256:${'b'.repeat(64)}`)).then(() => null, (e: unknown) => e as { code: string; retryable: boolean; message: string });
      expect(err).toMatchObject({ code: 'registry_unreachable', retryable: true });
      expect(err!.message).toContain('snap_x');
      expect(err!.message).toContain(dead);
      const missing = await transport.fetch(snap(`${registry.address}/berth-snapshot@sha256:${'b'.repeat(64)}`));
      expect(missing.kind).toBe('reconcile');
      expect((missing as { reason: string }).reason).toContain('snap_x');
      expect((missing as { reason: string }).reason).toContain(registry.address);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('async pushes: a host killed after a checkpoint commit but before its push lands resumes on engine B from the newest pushed snapshot and re-runs the safe steps after it', async () => {
    const expected = await uninterruptedDigest();
    const fx = await fixture('snapshot: { push: async }\n');
    // Pushes run in order behind their commits: the kill at the second push leaves the first pushed, the second not.
    const first = await fx.cli(['run', fx.plan, '--json'], { BERTH_REGISTRY: registry.address, BERTH_TEST_TOKEN: TOKEN, BERTH_FAULT: 'snapshot.push.async#2' });
    expect(first.signal, first.stderr).toBe('SIGKILL');
    fx.allowLeftovers('engine A (the main engine) keeps the killed host\'s container; the run moved to engine B');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const snaps = await fx.read((s) => s.listSnapshots({ runId }));
    const pushed = snaps.filter((s) => s.registryRef !== null);
    expect(pushed.map((s) => s.id)).toEqual([snaps[0]!.id]);
    expect(snaps.length).toBeGreaterThan(1);

    const end = await fx.cli(['resume', runId, '--json'], onB());
    expect(end.code, end.stderr).toBe(0);
    expect(lastJson<Summary>(end).run.state).toBe('completed');
    const final = await fx.read(async (s) => (await s.listSnapshots({ runId })).at(-1)!);
    expect(final.workspaceDigest).toBe(expected);
    // The steps after the pushed snapshot ran again, as a new generation.
    const effects = await fx.read((s) => s.listEffects({ runId }));
    expect(effects.some((e) => /:step:\d+:g[1-9]/.test(e.id))).toBe(true);
    // Every snapshot of the finished run reached the registry (the last pushes land before the run ends).
    const after = await fx.read((s) => s.listSnapshots({ runId }));
    expect(after.at(-1)!.registryRef).not.toBeNull();
  });
});

describe('agent sessions travel through the registry', { timeout: 300_000 }, () => {
  it('a session started on engine A is continued with berth chat on engine B, which sees the files of its last checkpoint', async () => {
    const docker = await requireEngine();
    const image = await requireTinyImage(docker);
    const dir = mkdtempSync(join(tmpdir(), 'berth-registry-agent-'));
    mkdirSync(join(dir, 'ws'));
    writeFileSync(join(dir, 'ws', 'hello.txt'), 'hello\n');
    writeFileSync(join(dir, 'env.yaml'), `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${image}" }\nresources: { memoryMb: 256, commandTimeoutS: 60 }\nlease: { ttlS: 600, heartbeatS: 10 }\n`);
    const model = await startModelServer([
      { content: 'Writing the note.', toolCalls: [{ name: 'exec', arguments: { command: 'echo made-on-engine-A > note.txt' } }] },
      { content: 'Wrote it.' },
      { content: 'Reading the note.', toolCalls: [{ name: 'read_file', arguments: { path: 'note.txt' } }] },
      { content: 'The note says made-on-engine-A.' },
    ]);
    const hostId = `regtest-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
    const store = join(dir, 'berth.db');
    const bin = await bundledCli();
    const cli = (args: string[], env: Record<string, string>) => runNode(bin, [...args, '--store', store], { BERTH_HOST_ID: hostId, BERTH_OPERATOR: 'tester', TEST_MODEL_KEY: 'sk-registry-test', BERTH_REGISTRY: registry.address, ...env }, 180_000);
    try {
      const first = await cli(['agent', 'write a note', '--env', join(dir, 'env.yaml'), '--workspace', join(dir, 'ws'), '--model', 'scripted-1', '--base-url', model.url, '--api-key-env', 'TEST_MODEL_KEY', '--json'], {});
      expect(first.code, first.stderr).toBe(0);
      const session = lastJson<{ run: { sessionId: string } }>(first).run.sessionId;
      const snaps = await readStore(store, (s) => s.listSnapshots({ sessionId: session }));
      expect(snaps.length).toBeGreaterThan(0);
      expect(snaps.every((s) => s.registryRef !== null)).toBe(true);

      const next = await cli(['chat', session, 'what does the note say?', '--json'], { DOCKER_HOST: engineB.dockerHost });
      expect(next.code, next.stderr).toBe(0);
      expect(lastJson<{ answer: string }>(next).answer).toBe('The note says made-on-engine-A.');
      const toolResult = model.requests.at(-1)!.body.messages.filter((m) => m.role === 'tool').at(-1)!;
      expect(String(toolResult.content)).toContain('made-on-engine-A');
    } finally {
      await model.close();
      await removeHostArtifacts(docker, hostId);
      for (const c of await engineB.docker.listContainers({ all: true, filters: { label: [`berth.host=${hostId}`] } })) await engineB.docker.getContainer(c.Id).remove({ force: true }).catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
