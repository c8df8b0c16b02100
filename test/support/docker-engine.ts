import Dockerode from 'dockerode';
import { execFileSync } from 'node:child_process';
import { networkInterfaces } from 'node:os';

/** The image every sandbox integration test runs on. */
export const TINY_IMAGE = 'berth/tiny:latest';

/**
 * A client for the local engine, or a thrown error saying it is absent. Docker-backed tests call
 * this in a hook so that they FAIL (never skip) on a machine without an engine.
 */
export async function requireEngine(): Promise<Dockerode> {
  const docker = new Dockerode();
  try {
    await docker.ping();
  } catch (err) {
    throw new Error(`Docker engine not reachable (${process.env.DOCKER_HOST ?? '/var/run/docker.sock'}: ${(err as Error).message}); these tests need a running engine`);
  }
  return docker;
}

/** The image id of berth/tiny:latest, or an error that says how to build it. */
export async function requireTinyImage(docker: Dockerode): Promise<string> {
  try {
    return (await docker.getImage(TINY_IMAGE).inspect()).Id;
  } catch {
    throw new Error(`image ${TINY_IMAGE} is missing on this engine; build it with \`npm run images -- tiny\``);
  }
}

/** Ids of containers carrying a label, for cleanup and failure reports. */
export async function containersWithLabel(docker: Dockerode, label: string): Promise<string[]> {
  return (await docker.listContainers({ all: true, filters: { label: [label] } })).map((c) => c.Id);
}

/**
 * The docker0 gateway address (the host's side of the default bridge), when it exists. Read with
 * `ip`, because Node lists only interfaces that are up and running, and docker0 has no carrier
 * while no container uses it.
 */
export function bridgeGateway(): string | undefined {
  try {
    const out = execFileSync('ip', ['-4', '-o', 'addr', 'show', 'docker0'], { encoding: 'utf8' });
    const m = /inet (\d+\.\d+\.\d+\.\d+)\//.exec(out);
    if (m) return m[1];
  } catch {
    // no ip tool or no docker0: fall through to the engine's view
  }
  try {
    const out = execFileSync('docker', ['network', 'inspect', 'bridge', '--format', '{{range .IPAM.Config}}{{.Gateway}}{{end}}'], { encoding: 'utf8' });
    return out.trim() || undefined;
  } catch {
    return undefined;
  }
}
