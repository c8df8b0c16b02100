import { execFileSync } from 'node:child_process';
import type Dockerode from 'dockerode';

/** What is left of one lease on an engine: its containers (and how many still run), its networks, and its INPUT rules on this machine. */
export async function leftoversOf(docker: Dockerode, leaseId: string): Promise<{ containers: number; running: number; networks: number; rules: number }> {
  const containers = await docker.listContainers({ all: true, filters: { label: [`berth.lease=${leaseId}`] } });
  const networks = await docker.listNetworks({ filters: { label: [`berth.lease=${leaseId}`] } });
  const rules = execFileSync('iptables', ['-S', 'INPUT'], { encoding: 'utf8' }).split('\n').filter((l) => l.includes(leaseId));
  return { containers: containers.length, running: containers.filter((c) => c.State === 'running').length, networks: networks.length, rules: rules.length };
}

export const nothingLeft = { containers: 0, running: 0, networks: 0, rules: 0 };

/** Rewrites a plan fixture's environment: a networked sandbox (a network and INPUT rules per lease) whose lease lasts `ttlS` without a renewal. */
export function networkedShortLease(envYaml: string, ttlS: number): string {
  return `${envYaml.replace('lease: { ttlS: 600, heartbeatS: 10 }', `lease: { ttlS: ${ttlS}, heartbeatS: 1 }`)}network: { mode: allowlist, allow: ["localhost:9"], allowOverride: ["localhost:9"] }\n`;
}
