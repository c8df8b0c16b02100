/**
 * The sandbox host the exec and sandbox A/B tools measure on (not a suite): the real engine, the
 * tiny image, a SQLite store in a fresh temp dir, and one lease spec, so each tool times only its own loop.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { createSandboxHost, type SandboxSpec } from '../host/sandbox';
import { openSqliteStore } from '../host/store';
import { systemClock } from '../host/support';
import { newId } from '../host/support/ids';
import { requireEngine, requireTinyImage } from '../test/support/docker-engine';

/** A host on the real engine with its own store under a temp dir named by `prefix`. */
export async function benchSandbox(prefix: string) {
  const docker = await requireEngine();
  const imageId = await requireTinyImage(docker);
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const store = openSqliteStore(join(dir, 'bench.db'));
  const hostId = newId('benchhost');
  const host = createSandboxHost({ docker, records: store, clock: systemClock, logger: pino({ level: 'warn' }), hostId });
  const spec: SandboxSpec = {
    imageDigest: imageId, imageRef: 'berth/tiny:latest', envFingerprint: 'sha256:' + 'b'.repeat(64),
    workspace: { path: '/workspace', owner: '1000:1000' },
    resources: { cpus: 1, memoryMb: 512, pids: 256, diskMb: 1024, commandTimeoutS: 60 },
    lease: { ttlS: 600, heartbeatS: 60 }, network: { mode: 'none' },
  };
  /** Closes the host, removes every container it labelled, closes the store and deletes the dir. */
  const close = async () => {
    await host.close();
    const left = await docker.listContainers({ all: true, filters: { label: [`berth.host=${hostId}`] } });
    await Promise.all(left.map((x) => docker.getContainer(x.Id).remove({ force: true }).catch(() => undefined)));
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return { docker, imageId, dir, store, hostId, host, spec, close };
}
