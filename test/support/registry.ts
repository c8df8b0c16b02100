import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A free TCP port on 127.0.0.1 (asked of the kernel, then released for the caller to bind). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/** A throwaway OCI registry a test started; {@link startRegistry}. */
export interface TestRegistry {
  /** `127.0.0.1:PORT`: what `BERTH_REGISTRY` or `snapshot.registry` takes. Engines allow 127.0.0.0/8 registries without TLS. */
  address: string;
  /** The registry's storage root (`docker/registry/v2/…` beneath it), to scan or to damage. */
  storage: string;
  /** Every file in the storage, with its bytes (for secret scans). */
  files(): Array<[path: string, bytes: Buffer]>;
  /** Deletes one blob (`sha256:…`) from the storage, behind the registry's back (a lost or damaged blob). */
  deleteBlob(digest: string): void;
  /** Stops the registry process (SIGKILL, by pid), keeping its storage and port: the registry is unreachable until {@link up}. */
  down(): Promise<void>;
  /** Starts the registry again on the same port and storage after {@link down}. */
  up(): Promise<void>;
  /** Stops the registry process (SIGTERM, by pid) and removes its storage. */
  stop(): Promise<void>;
}

/**
 * Starts Debian's `docker-registry` (installed by `.ci/setup-registry`) as
 * `docker-registry serve CONFIG` on 127.0.0.1 and a free port, storage in a temp dir, delete
 * enabled, no auth; resolves once `/v2/` answers. Each call is its own registry: tests share nothing.
 */
export async function startRegistry(): Promise<TestRegistry> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-registry-'));
  const storage = join(dir, 'data');
  const port = await freePort();
  const config = join(dir, 'config.yml');
  writeFileSync(
    config,
    ['version: 0.1', 'log: { level: warn }', 'storage:', `  filesystem: { rootdirectory: ${storage} }`, '  delete: { enabled: true }', 'http:', `  addr: 127.0.0.1:${port}`, ''].join('\n'),
  );
  let child!: ChildProcess;
  let stderr = '';
  let exited: Promise<void> = Promise.resolve();
  const launch = async () => {
    child = spawn('docker-registry', ['serve', config], { stdio: ['ignore', 'ignore', 'pipe'] });
    stderr = '';
    child.stderr!.on('data', (b: Buffer) => (stderr = (stderr + b.toString()).slice(-4000)));
    const c = child;
    exited = new Promise<void>((r) => c.once('exit', () => r()));
    const end = Date.now() + 20_000;
    for (;;) {
      if (c.exitCode !== null) throw new Error(`docker-registry exited (${c.exitCode}): ${stderr}`);
      const ok = await fetch(`http://127.0.0.1:${port}/v2/`).then((r) => r.ok, () => false);
      if (ok) break;
      if (Date.now() > end) {
        c.kill('SIGKILL');
        throw new Error(`docker-registry did not answer on 127.0.0.1:${port}: ${stderr}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  await launch();
  const walk = (p: string, out: string[] = []): string[] => {
    for (const e of readdirSync(p, { withFileTypes: true })) (e.isDirectory() ? walk(join(p, e.name), out) : out.push(join(p, e.name)));
    return out;
  };
  return {
    address: `127.0.0.1:${port}`,
    storage,
    files: () => walk(storage).map((f) => [f, readFileSync(f)] as [string, Buffer]),
    deleteBlob(digest: string) {
      const hex = digest.replace(/^sha256:/, '');
      const blobDir = join(storage, 'docker', 'registry', 'v2', 'blobs', 'sha256', hex.slice(0, 2), hex);
      statSync(blobDir);
      rmSync(blobDir, { recursive: true, force: true });
    },
    async down() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exited;
      }
    },
    up: launch,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
        if (child.exitCode === null) child.kill('SIGKILL');
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The layer digests of an image manifest in the registry (`repo`, `reference` = tag or digest). */
export async function manifestLayers(address: string, repo: string, reference: string): Promise<string[]> {
  const r = await fetch(`http://${address}/v2/${repo}/manifests/${reference}`, { headers: { accept: 'application/vnd.docker.distribution.manifest.v2+json' } });
  if (!r.ok) throw new Error(`manifest ${repo}@${reference}: HTTP ${r.status}`);
  return ((await r.json()) as { layers: Array<{ digest: string }> }).layers.map((l) => l.digest);
}

/** The HTTP status the registry answers for a manifest (`reference` = tag or digest): 200 present, 404 deleted or never there. */
export async function manifestStatus(address: string, repo: string, reference: string): Promise<number> {
  const r = await fetch(`http://${address}/v2/${repo}/manifests/${reference}`, { method: 'HEAD', headers: { accept: 'application/vnd.docker.distribution.manifest.v2+json' } });
  return r.status;
}
