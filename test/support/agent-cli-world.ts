import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Store } from '../../host/store';
import { runNode, type ChildEnd } from './child';
import { readStore } from './temp-store';
import { requireEngine, requireTinyImage } from './docker-engine';
import { startModelServer, type ModelServer, type ModelServerOptions } from './model-server';
import { bundledCli, removeHostArtifacts } from './plan-fixture';

/** The model API key the CLI worlds pass (by variable name) to `berth agent`. */
export const SECRET = 'sk-cli-test-secret-0123456789';

export interface CliWorld {
  dir: string;
  hostId: string;
  store: string;
  model: ModelServer;
  cli(args: string[], extraEnv?: Record<string, string>): Promise<ChildEnd>;
  agentArgs(task: string, extra?: string[]): string[];
  read<T>(f: (s: Store) => Promise<T>): Promise<T>;
  cleanup(): Promise<void>;
}

/**
 * `berth agent` and `berth chat` through the bundled CLI against a scripted model server, on
 * berth/tiny with its own store and host id. `snapshotPolicy` defaults to `never`.
 */
export async function cliWorld(script: Parameters<typeof startModelServer>[0], o: { snapshotPolicy?: 'never' | 'after-each-step'; server?: ModelServerOptions } = {}): Promise<CliWorld> {
  const docker = await requireEngine();
  const image = await requireTinyImage(docker);
  const dir = mkdtempSync(join(tmpdir(), 'berth-agent-cli-'));
  mkdirSync(join(dir, 'ws'));
  writeFileSync(join(dir, 'ws', 'hello.txt'), 'hello from the host\n');
  writeFileSync(join(dir, 'env.yaml'), `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${image}" }\nresources: { memoryMb: 256, commandTimeoutS: 60 }\nlease: { ttlS: 600, heartbeatS: 10 }\nsnapshot: { policy: ${o.snapshotPolicy ?? 'never'} }\n`);
  const model = await startModelServer(script, o.server);
  const hostId = `clitest-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const store = join(dir, 'berth.db');
  const bin = await bundledCli();
  const env = { BERTH_HOST_ID: hostId, BERTH_OPERATOR: 'tester', TEST_MODEL_KEY: SECRET };
  return {
    dir,
    hostId,
    store,
    model,
    cli: (args, extraEnv = {}) => runNode(bin, [...args, '--store', store], { ...env, ...extraEnv }, 180_000),
    agentArgs: (task, extra = []) => ['agent', task, '--env', join(dir, 'env.yaml'), '--workspace', join(dir, 'ws'), '--model', 'scripted-1', '--base-url', model.url, '--api-key-env', 'TEST_MODEL_KEY', ...extra],
    read: (f) => readStore(store, f),
    async cleanup() {
      await model.close();
      await removeHostArtifacts(docker, hostId, [store]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}


/**
 * `berth ARGS` in the background, to be killed like a host that dies. Its end is awaited from the
 * start (an `exit` listener added after the fact would wait forever for a child already gone), and
 * its stderr is kept for the failure message.
 */
export async function startInBackground(w: CliWorld, args: string[]) {
  const bin = await bundledCli();
  const child = spawn(process.execPath, [bin, ...args, '--store', w.store], { env: { ...process.env, BERTH_HOST_ID: w.hostId, BERTH_OPERATOR: 'tester', TEST_MODEL_KEY: SECRET }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, exited, stderr: () => stderr };
}
