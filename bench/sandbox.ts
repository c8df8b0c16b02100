/**
 * sandbox: the adapter's hot paths against raw dockerode doing the same work with the same
 * options, measured interleaved in one run on the same engine (medians):
 *
 * - cold_lease_vs_raw: `host.lease` (image check, create, start, lease record) vs createContainer + start;
 * - warm_lease_p50_ms: `pool.lease` from a filled warm pool (inspect + lease record);
 * - exec_vs_raw: `lease.exec('true')` vs exec create + start + drain + inspect;
 * - file_io_vs_raw: writeFile + readFile of 10 MB vs putArchive + getArchive of the same tar, both
 *   timed in each round (alternating which goes first); the median of the per-round ratios.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import pino from 'pino';
import { extract, pack } from 'tar-stream';
import { containerCreateOptions, containerLabels, createSandboxHost, createWarmPool, type SandboxSpec } from '../host/sandbox';
import { openSqliteStore } from '../host/store';
import { systemClock } from '../host/support';
import { newId } from '../host/support/ids';
import type { Report } from './run';
import { requireEngine, requireTinyImage } from '../test/support/docker-engine';
import { median, timed } from './_stats';

function tarOf(name: string, data: Buffer): Promise<Buffer> {
  const p = pack();
  p.entry({ name, size: data.length, mode: 0o644, uid: 1000, gid: 1000 }, data);
  p.finalize();
  return new Promise((res, rej) => {
    const chunks: Buffer[] = [];
    p.on('data', (c: unknown) => chunks.push(c as Buffer));
    p.on('end', () => res(Buffer.concat(chunks)));
    p.on('error', rej);
  });
}

async function untarFirst(stream: Readable): Promise<Buffer> {
  const ex = extract();
  stream.pipe(ex as unknown as NodeJS.WritableStream);
  let first: Buffer | undefined;
  for await (const entry of ex) {
    const chunks: Buffer[] = [];
    for await (const c of entry) chunks.push(c as Buffer);
    first ??= Buffer.concat(chunks);
  }
  if (!first) throw new Error('empty archive');
  return first;
}

export default async function sandboxBench(report: Report): Promise<void> {
  const docker = await requireEngine();
  const imageId = await requireTinyImage(docker);
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-sandbox-'));
  const store = openSqliteStore(join(dir, 'bench.db'));
  const hostId = newId('benchhost');
  const host = createSandboxHost({ docker, records: store, clock: systemClock, logger: pino({ level: 'warn' }), hostId });
  const spec: SandboxSpec = {
    imageDigest: imageId,
    imageRef: 'berth/tiny:latest',
    envFingerprint: 'sha256:' + 'b'.repeat(64),
    workspace: { path: '/workspace', owner: '1000:1000' },
    resources: { cpus: 1, memoryMb: 512, pids: 256, diskMb: 1024, commandTimeoutS: 60 },
    lease: { ttlS: 600, heartbeatS: 60 },
    network: { mode: 'none' },
  };
  const cleanup: Array<() => Promise<unknown>> = [];
  try {
    // Warm-up: first-use costs (event subscription, image metadata, page cache) out of the figures.
    const warm = await host.lease(spec, { sessionId: 'warmup', autoHeartbeat: false });
    await warm.exec('true');
    await warm.release();

    // cold lease vs raw create + start
    const ours: number[] = [];
    const raw: number[] = [];
    for (let i = 0; i < 15; i += 1) {
      const [a, lease] = await timed(() => host.lease(spec, { sessionId: 'bench', autoHeartbeat: false }));
      ours.push(a);
      cleanup.push(() => lease.release());
      const labels = containerLabels({ hostId, storeId: await host.storeId(), instanceId: host.instanceId, envFingerprint: spec.envFingerprint, createdAt: Date.now(), sessionId: 'bench', leaseId: newId('lease') });
      const [b, container] = await timed(async () => {
        const c = await docker.createContainer(containerCreateOptions(spec, labels, `berth-raw-${newId('c').slice(2)}`));
        await c.start();
        return c;
      });
      raw.push(b);
      cleanup.push(() => container.remove({ force: true }));
    }
    report('cold_lease_vs_raw', median(ours) / median(raw), 'ratio');
    report('cold_lease_ms', median(ours), 'absolute');
    await Promise.all(cleanup.splice(0).map((f) => f().catch(() => undefined)));

    // warm lease
    const pool = createWarmPool(host, spec, { size: 3 });
    const warmMs: number[] = [];
    for (let i = 0; i < 15; i += 1) {
      await pool.ready();
      const [ms, lease] = await timed(() => pool.lease({ sessionId: 'bench', autoHeartbeat: false }));
      warmMs.push(ms);
      cleanup.push(() => lease.release());
    }
    await pool.close();
    report('warm_lease_p50_ms', median(warmMs), 'absolute');
    await Promise.all(cleanup.splice(0).map((f) => f().catch(() => undefined)));

    // exec of `true` vs raw exec
    const lease = await host.lease(spec, { sessionId: 'bench', autoHeartbeat: false });
    cleanup.push(() => lease.release());
    const container = docker.getContainer(lease.containerId);
    const rawExec = async () => {
      const ex = await container.exec({ Cmd: ['true'], User: '1000:1000', AttachStdout: true, AttachStderr: true, Tty: false });
      const s = (await ex.start({ hijack: true, stdin: false })) as NodeJS.ReadableStream;
      await new Promise<void>((res) => {
        s.on('data', () => undefined);
        s.on('end', res);
        s.on('close', res);
      });
      const info = await ex.inspect();
      if (info.ExitCode !== 0) throw new Error('raw exec failed');
    };
    const ourExec: number[] = [];
    const rawExecMs: number[] = [];
    for (let i = 0; i < 40; i += 1) {
      const [a, r] = await timed(() => lease.exec('true'));
      if (r.exitCode !== 0) throw new Error(`exec failed: ${JSON.stringify(r)}`);
      ourExec.push(a);
      rawExecMs.push((await timed(rawExec))[0]);
    }
    report('exec_vs_raw', median(ourExec) / median(rawExecMs), 'ratio');
    report('exec_ms', median(ourExec), 'absolute');

    // 10 MB write + read
    const data = Buffer.alloc(10 * 1024 * 1024, 7);
    const ourIo: number[] = [];
    const rawIo: number[] = [];
    const ourRound = async () => {
      await lease.writeFile('bench.bin', data);
      const back = await lease.readFile('bench.bin');
      if (back.length !== data.length) throw new Error('short read');
    };
    const rawRound = async () => {
      await container.putArchive(await tarOf('raw.bin', data), { path: '/workspace' });
      const back = await untarFirst((await container.getArchive({ path: '/workspace/raw.bin' })) as unknown as Readable);
      if (back.length !== data.length) throw new Error('short raw read');
    };
    // Each round times both, in alternating order; the figure is the median of the per-round
    // ratios (each round sees the same load; a 10 MB round trip swings 2x on a loaded engine).
    for (let i = 0; i < 12; i += 1) {
      if (i % 2 === 0) {
        ourIo.push((await timed(ourRound))[0]);
        rawIo.push((await timed(rawRound))[0]);
      } else {
        rawIo.push((await timed(rawRound))[0]);
        ourIo.push((await timed(ourRound))[0]);
      }
    }
    report('file_io_vs_raw', median(ourIo.map((x, i) => x / rawIo[i]!)), 'ratio');
    report('file_io_ratio_of_medians', median(ourIo) / median(rawIo), 'ratio');
    report('file_io_ms', median(ourIo), 'absolute');
  } finally {
    await Promise.all(cleanup.map((f) => f().catch(() => undefined)));
    await host.close();
    const left = await docker.listContainers({ all: true, filters: { label: [`berth.host=${hostId}`] } });
    await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
