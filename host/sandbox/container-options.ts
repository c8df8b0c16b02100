import type Dockerode from 'dockerode';
import { parseOwner, type SandboxSpec } from './sandbox-spec';
import { watchdogCommand } from './lease-watchdog';

/**
 * A tmpfs of its own, root-owned, mode 0711: commands can open a file there whose name they know
 * but cannot list or create anything. It holds the kept-process list (process-scripts.ts) and the
 * per-exec secret directories (host/secrets), whose random names no other process can learn by
 * listing. Mounted under /dev (itself a tmpfs of the engine's), so it is in no layer, diff, commit
 * or snapshot, and every container starts with an empty one. (A tmpfs whose mountpoint lives in
 * the layer does not work: once a snapshot holds the mountpoint directory, the engine copies its
 * mode onto the new tmpfs.)
 */
export const CONTROL_DIR = '/dev/berth';

/**
 * The exec registry, a root-owned tmpfs of mode 0733: a command wrapper creates an empty file
 * named after its exec id (see exec-scripts.ts), and no command can list what is there, so only a
 * host that knows an id can find or remove its entry. A later host (root lists it) learns from it
 * which commands an earlier host started whose end it may never have seen.
 */
export const EXEC_REGISTRY_DIR = '/dev/berth-execs';

/** The two mounts, as the engine's `Tmpfs` option takes them. */
export const CONTROL_MOUNTS: Record<string, string> = {
  [CONTROL_DIR]: 'rw,nosuid,nodev,noexec,mode=0711,size=16m',
  [EXEC_REGISTRY_DIR]: 'rw,nosuid,nodev,noexec,mode=0733,size=1m',
};

/**
 * An idle command that never stops (raw containers of the benches). A sandbox idles in its
 * lease watchdog instead (lease-watchdog.ts): PID 1 is docker-init (reaps orphans), its child
 * idles until the lease goes unrenewed for its TTL.
 */
export const IDLE_COMMAND = ['/bin/sh', '-c', 'while :; do sleep 2147483647; done'];

const MIB = 1024 * 1024;
/** The engine's own default size of /dev/shm. */
const DEFAULT_SHM_BYTES = 64 * MIB;

/**
 * The proxy address, and the model gateway's base URL for OpenAI-compatible clients, are no
 * secrets. The key variable holds a placeholder: clients refuse to start without one, and the host
 * puts the real key on the forwarded request. The gateway's own address bypasses the proxy.
 */
function egressEnv(proxyUrl: string, gatewayUrl: string | undefined): string[] {
  const env = ['http_proxy', 'HTTP_PROXY', 'https_proxy', 'HTTPS_PROXY'].map((k) => `${k}=${proxyUrl}`);
  if (!gatewayUrl) return env;
  const host = new URL(gatewayUrl).hostname;
  return [...env, `OPENAI_BASE_URL=${gatewayUrl}`, `OPENAI_API_KEY=${GATEWAY_KEY_PLACEHOLDER}`, `BERTH_MODEL_GATEWAY=${gatewayUrl}`, `no_proxy=${host}`, `NO_PROXY=${host}`];
}

/** What the sandbox's clients send as their key; the gateway replaces it with the provider's. */
export const GATEWAY_KEY_PLACEHOLDER = 'berth-gateway';

/**
 * The create options for a sandbox container: limits, hardening and labels. Exported so the bench
 * can create a raw container with exactly the same options.
 */
export function containerCreateOptions(spec: SandboxSpec, labels: Record<string, string>, name?: string, egress?: { networkName: string; proxyUrl?: string; gatewayUrl?: string }): Dockerode.ContainerCreateOptions {
  const r = spec.resources;
  const memory = Math.round(r.memoryMb * MIB);
  const diskBytes = Math.round(r.diskMb * MIB);
  parseOwner(spec.workspace.owner);
  return {
    ...(name === undefined ? {} : { name }),
    Image: spec.imageDigest,
    Entrypoint: [],
    Cmd: watchdogCommand(spec.lease.ttlS),
    WorkingDir: spec.workspace.path,
    Labels: labels,
    Tty: false,
    OpenStdin: false,
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
    // The proxy address is no secret; both spellings, since tools disagree on which they read.
    ...(egress?.proxyUrl ? { Env: egressEnv(egress.proxyUrl, egress.gatewayUrl) } : {}),
    NetworkDisabled: egress === undefined,
    HostConfig: {
      NanoCpus: Math.round(r.cpus * 1e9),
      Memory: memory,
      // Equal to Memory: no swap, so an allocation beyond the limit is an OOM kill, not a slowdown.
      MemorySwap: memory,
      // /dev/shm is memory no process frees when it dies. At the engine's 64 MiB in a sandbox of
      // 64 MiB, a command that filled it was OOM-killed and left the memory held: every later exec
      // died at its start (runc's init OOM-killed, exit 126) until the file was removed by hand. At
      // most half the limit, a full /dev/shm is a write's ENOSPC and the sandbox keeps room to run.
      ShmSize: Math.min(DEFAULT_SHM_BYTES, Math.floor(memory / 2)),
      PidsLimit: r.pids,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      NetworkMode: egress?.networkName ?? 'none',
      Init: true,
      Binds: [],
      Mounts: [],
      Tmpfs: { ...CONTROL_MOUNTS },
      // No single file may outgrow the disk limit: the kernel stops it with SIGXFSZ (exit 153)
      // before the periodic layer measurement could notice. See README.md "Disk".
      Ulimits: [{ Name: 'fsize', Soft: diskBytes, Hard: diskBytes }],
      // The sandbox networks are IPv4 only and the INPUT rules are written for IPv4; no IPv6 at
      // all means no link-local way around them, whatever the engine's default is.
      ...(egress ? { Sysctls: { 'net.ipv6.conf.all.disable_ipv6': '1', 'net.ipv6.conf.default.disable_ipv6': '1' } } : {}),
      RestartPolicy: { Name: 'no' },
      AutoRemove: false,
      Privileged: false,
    },
  };
}
