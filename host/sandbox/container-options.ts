import type Dockerode from 'dockerode';
import { parseOwner, type SandboxSpec } from './sandbox-spec';

/**
 * Where each running exec records `<pgid> <nonce>` so that a later exec can kill its process tree.
 * The engine mounts a fresh tmpfs with mode 1777 at /dev/shm in every container, so any user can
 * write there, and nothing there reaches the writable layer or a `docker commit` snapshot. A tmpfs
 * of our own does not work: once a snapshot holds its mountpoint directory (root, 0755), the engine
 * copies that mode onto the new tmpfs and the non-root owner can no longer write to it.
 */
export const CONTROL_DIR = '/dev/shm';

/**
 * PID 1 is docker-init (reaps orphans); its child idles forever. The loop keeps the container up
 * if something kills the `sleep`.
 */
export const IDLE_COMMAND = ['/bin/sh', '-c', 'while :; do sleep 2147483647; done'];

const MIB = 1024 * 1024;

/**
 * The create options for a sandbox container: limits, hardening and labels. Exported so the bench
 * can create a raw container with exactly the same options.
 */
export function containerCreateOptions(spec: SandboxSpec, labels: Record<string, string>, name?: string, egress?: { networkName: string; proxyUrl?: string }): Dockerode.ContainerCreateOptions {
  const r = spec.resources;
  const memory = Math.round(r.memoryMb * MIB);
  const diskBytes = Math.round(r.diskMb * MIB);
  parseOwner(spec.workspace.owner);
  return {
    ...(name === undefined ? {} : { name }),
    Image: spec.imageDigest,
    Entrypoint: [],
    Cmd: IDLE_COMMAND,
    WorkingDir: spec.workspace.path,
    Labels: labels,
    Tty: false,
    OpenStdin: false,
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
    // The proxy address is no secret; both spellings, since tools disagree on which they read.
    ...(egress?.proxyUrl ? { Env: ['http_proxy', 'HTTP_PROXY', 'https_proxy', 'HTTPS_PROXY'].map((k) => `${k}=${egress.proxyUrl}`) } : {}),
    NetworkDisabled: egress === undefined,
    HostConfig: {
      NanoCpus: Math.round(r.cpus * 1e9),
      Memory: memory,
      // Equal to Memory: no swap, so an allocation beyond the limit is an OOM kill, not a slowdown.
      MemorySwap: memory,
      PidsLimit: r.pids,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      NetworkMode: egress?.networkName ?? 'none',
      Init: true,
      Binds: [],
      Mounts: [],
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
