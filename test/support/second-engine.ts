import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import Dockerode from 'dockerode';

/** Another Docker engine on this machine ("another host" in tests); {@link startSecondEngine}. */
export interface SecondEngine {
  /** `unix://…/docker.sock`: what `DOCKER_HOST` takes for a child process driving this engine. */
  dockerHost: string;
  socket: string;
  /** A client for this engine (never the main one). */
  docker: Dockerode;
  /** Stops the daemon (SIGTERM by its pid, SIGKILL after 30 s), deletes its bridge and every file it had. Safe to call twice. */
  stop(): Promise<void>;
}

const ping = async (docker: Dockerode) => docker.ping().then(() => true, () => false);

/**
 * Starts a second `dockerd` that shares nothing with the main engine: its own data root, exec
 * root, socket and pidfile under a temp dir, and its OWN bridge (`br-b<random>`, created first,
 * with a distinct 10.2xx.x.0/24 subnet), `--iptables=false` so it never touches the main engine's
 * rules. Never `--bridge=none` or a changed default address pool: in one network namespace either
 * deleted the main engine's `docker0` (see /work/shared/DOCKER-NOTES.md). It starts with no images:
 * tests load or pull what they need. Costs a few seconds to start and ~1-13 s to stop; keep them few.
 */
export async function startSecondEngine(name = 'b'): Promise<SecondEngine> {
  const tag = Math.random().toString(36).slice(2, 7);
  // Short paths: containerd's sockets live under the exec root and unix socket paths are limited to 108 bytes.
  const dir = mkdtempSync(`/tmp/be${name}-`);
  const exec = join(dir, 'x');
  mkdirSync(exec);
  const socket = join(dir, 'docker.sock');
  const pidfile = join(dir, 'docker.pid');
  const bridge = `br-b${tag}`.slice(0, 15);
  const subnet = `10.${200 + Math.floor(Math.random() * 50)}.${Math.floor(Math.random() * 250)}`;
  execFileSync('ip', ['link', 'add', bridge, 'type', 'bridge']);
  execFileSync('ip', ['addr', 'add', `${subnet}.1/24`, 'dev', bridge]);
  execFileSync('ip', ['link', 'set', bridge, 'up']);
  const log = openSync(join(dir, 'dockerd.log'), 'a');
  const child = spawn(
    'dockerd',
    ['--data-root', join(dir, 'data'), '--exec-root', exec, '-H', `unix://${socket}`, '--pidfile', pidfile, '--bridge', bridge, '--iptables=false', '--ip-masq=false'],
    { detached: true, stdio: ['ignore', log, log] },
  );
  child.unref();
  const docker = new Dockerode({ socketPath: socket });
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    const pid = child.pid!;
    const alive = () => existsSync(`/proc/${pid}`) && !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z');
    if (alive()) {
      process.kill(pid, 'SIGTERM');
      const end = Date.now() + 30_000;
      while (alive() && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
      if (alive()) process.kill(pid, 'SIGKILL');
    }
    try {
      execFileSync('ip', ['link', 'del', bridge], { stdio: 'ignore' });
    } catch {
      // already gone
    }
    // Mounts the daemon left (overlay layers, netns, shm) must go before the files.
    try {
      const mounts = readFileSync('/proc/mounts', 'utf8').split('\n').map((l) => l.split(' ')[1] ?? '').filter((m) => m.startsWith(dir)).reverse();
      for (const m of mounts) execFileSync('umount', ['-l', m], { stdio: 'ignore' });
    } catch {
      // nothing mounted
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const end = Date.now() + 60_000;
  while (!(await ping(docker))) {
    if (child.exitCode !== null || Date.now() > end) {
      const out = existsSync(join(dir, 'dockerd.log')) ? readFileSync(join(dir, 'dockerd.log'), 'utf8').slice(-3000) : '';
      await stop();
      throw new Error(`second dockerd did not answer on ${socket}: ${out}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return { dockerHost: `unix://${socket}`, socket, docker, stop };
}
