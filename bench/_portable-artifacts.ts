/**
 * The artifacts figure of the `portable` suite (bench/portable.ts runs it after the registry ones).
 *
 * - artifacts_vs_raw: copying a step's artifacts (50 MB in 5 files) out of the sandbox into the
 *   content-addressed artifact store (listing, confinement checks, streaming sha256, fsync,
 *   rename) vs raw `getArchive` of the same paths written to files.
 */
import Dockerode from 'dockerode';
import { createWriteStream, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import pino from 'pino';
import { parseEnvironment } from '../environment';
import { collectArtifacts, LocalArtifactStore } from '../host/artifacts';
import { SandboxHost } from '../host/sandbox';
import { RunSandbox } from '../host/run-sandbox';
import { Snapshotter } from '../host/snapshot';
import { snapshotEngine } from '../host/sandbox';
import { openSqliteStore } from '../host/store';
import { systemClock } from '../host/support';
import type { Report } from './run';
import { median, timed } from './_stats';

const ROUNDS = 5;
const FILES = 5;
const MB_EACH = 10;
const logger = pino({ level: 'silent' });

/** `portable.artifacts_vs_raw`: Berth's artifact copy-out of 50 MB vs raw getArchive of the same paths. */
export async function artifactsVsRaw(report: Report): Promise<void> {
  const docker = new Dockerode();
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-portable-'));
  const store = openSqliteStore(join(dir, 'bench.db'));
  const image = (await docker.getImage('berth/tiny:latest').inspect()).Id;
  const env = parseEnvironment(
    `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${image}" }\nresources: { memoryMb: 512, diskMb: 4096 }\n`,
    'bench-env.yaml',
  );
  const sandbox = new SandboxHost({ docker, records: store, clock: systemClock, logger, hostId: `bench-portable-${process.pid}` });
  const engine = snapshotEngine(docker);
  const plan = new RunSandbox({ store, sandbox, snapshots: new Snapshotter({ engine, store, logger }), clock: systemClock, logger });
  try {
    const lease = await plan.leaseFresh('bench-artifacts', 'bench', env, AbortSignal.timeout(60_000));
    const made = await lease.exec(['sh', '-c', `mkdir -p out && for i in $(seq 1 ${FILES}); do head -c ${MB_EACH * 1024 * 1024} /dev/urandom > out/part$i.bin; done`], { timeoutMs: 120_000 });
    if (made.exitCode !== 0) throw new Error(`writing the artifacts failed: ${made.stderr}`);
    const container = docker.getContainer(lease.containerId);
    const paths = Array.from({ length: FILES }, (_, i) => `${env.workspace.path}/out/part${i + 1}.bin`);
    const berth: number[] = [];
    const raw: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      // Alternating which goes first, so page-cache warmth favours neither.
      const runs = [
        async () => {
          const to = join(dir, `raw-${round}`);
          mkdirSync(to);
          const [ms] = await timed(async () => {
            for (const [i, p] of paths.entries()) await pipeline((await container.getArchive({ path: p })) as unknown as Readable, createWriteStream(join(to, `part${i}.tar`)));
          });
          raw.push(ms);
        },
        async () => {
          const artifacts = new LocalArtifactStore(join(dir, `store-${round}`));
          const [ms, r] = await timed(() => collectArtifacts(lease, { step: 'bench', globs: ['out/*.bin'], limits: { files: 100, mb: 1024 }, store: artifacts, secrets: [] }));
          if (r.files.length !== FILES) throw new Error(`expected ${FILES} artifacts, got ${r.files.length}`);
          berth.push(ms);
        },
      ];
      if (round % 2) runs.reverse();
      for (const f of runs) await f();
    }
    report('artifacts_vs_raw', median(berth) / median(raw), 'ratio');
    report('artifacts_50mb_ms', median(berth), 'absolute');
    report('raw_get_archive_50mb_ms', median(raw), 'absolute');
  } finally {
    await plan.finish('bench-artifacts').catch(() => {});
    await sandbox.close().catch(() => {});
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
