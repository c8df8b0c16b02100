import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Dockerode from 'dockerode';
import pino from 'pino';
import { submitAgentRun, type AgentLiveEvent, type AgentSettingsInput } from '../../host/agent';
import { createHostRuntime, type HostRuntime } from '../../host/runtime/host-runtime';
import { createSandboxHost, snapshotEngine, type SandboxHost } from '../../host/sandbox';
import { openSqliteStore } from '../../host/store';
import { systemClock } from '../../host/support';
import { newId } from '../../host/support/ids';
import { tinyEnvironment } from './agent-environment';
import { requireEngine, requireTinyImage } from './docker-engine';
import { startModelServer, type ModelServer, type ModelServerOptions, type ScriptedTurn } from './model-server';
import { removeHostArtifacts } from './plan-fixture';
import { leakGuard, type Leftover } from './leak-check';
import { invariantGuard } from './invariant-check';
import type { InvariantName } from '../../host/record';

export { tinyEnvironment };

export interface AgentWorld {
  dir: string;
  storePath: string;
  hostId: string;
  docker: Dockerode;
  imageId: string;
  model: ModelServer;
  live: AgentLiveEvent[];
  rt: HostRuntime;
  sandbox: SandboxHost;
  settings(over?: Partial<AgentSettingsInput>): AgentSettingsInput;
  start(message: string, o?: { settings?: Partial<AgentSettingsInput>; requestId?: string; snapshot?: 'after-each-step' | 'never'; runBudgetS?: number }): ReturnType<typeof submitAgentRun>;
  /** A new host process's view: the same store and host id, a fresh kernel. */
  restart(): Promise<HostRuntime>;
  /** Opts this test out of the leak check, with the reason it leaves objects behind on purpose. */
  allowLeftovers(reason: string, only?: (l: Leftover) => boolean): void;
  /** Opts this test out of named run invariants (`berth check`), with the reason its runs break them on purpose. */
  allowViolations(reason: string, names: InvariantName[]): void;
  /** Stops everything, checks for leaks (see leak-check.ts), removes the host's objects, then fails on a leak. */
  cleanup(): Promise<void>;
}

/**
 * A started host runtime over a temp store with a unique host id, a scripted model server, and
 * the tiny image. `cleanup` stops everything and removes the containers and snapshot images of
 * the host id, pass or fail.
 */
export async function agentWorld(script: ScriptedTurn[] | Parameters<typeof startModelServer>[0], o: { apiKeyEnv?: string; server?: ModelServerOptions } = {}): Promise<AgentWorld> {
  const docker = await requireEngine();
  const imageId = await requireTinyImage(docker);
  const dir = mkdtempSync(join(tmpdir(), 'berth-agent-'));
  const storePath = join(dir, 'berth.db');
  const hostId = newId('agenttest');
  const model = await startModelServer(script, o.server);
  const apiKeyEnv = o.apiKeyEnv ?? 'BERTH_TEST_MODEL_KEY';
  process.env[apiKeyEnv] ??= 'sk-agent-test-key';
  const live: AgentLiveEvent[] = [];
  const leaks = leakGuard(docker, hostId);
  const invariants = invariantGuard();
  const stores: Array<ReturnType<typeof openSqliteStore>> = [];
  const hosts: SandboxHost[] = [];
  const runtimes: HostRuntime[] = [];
  const build = async () => {
    const store = openSqliteStore(storePath);
    const logger = pino({ level: process.env.BERTH_TEST_LOG ?? 'silent' });
    const sandbox = createSandboxHost({ docker, records: store, clock: systemClock, logger, hostId });
    const rt = createHostRuntime({ store, sandbox, engine: snapshotEngine(docker), clock: systemClock, logger, hostId, onAgentLive: (e) => live.push(e) });
    stores.push(store);
    hosts.push(sandbox);
    runtimes.push(rt);
    await rt.kernel.start();
    return { rt, sandbox };
  };
  const first = await build();
  const settings = (over: Partial<AgentSettingsInput> = {}): AgentSettingsInput => ({
    model: { baseUrl: model.url, model: 'scripted-1', apiKeyEnv, backoffMs: 20, maxBackoffMs: 200 },
    ...over,
  });
  const world: AgentWorld = {
    dir,
    storePath,
    hostId,
    docker,
    imageId,
    model,
    live,
    rt: first.rt,
    sandbox: first.sandbox,
    settings,
    start: (message, s = {}) =>
      submitAgentRun(
        { ...world.rt, toolNames: [...world.rt.agent.tools.keys()] },
        { message, settings: settings(s.settings), environment: tinyEnvironment(imageId, { snapshot: s.snapshot, runBudgetS: s.runBudgetS }), requestId: s.requestId },
      ),
    async restart() {
      await world.rt.kernel.stop();
      const next = await build();
      world.rt = next.rt;
      world.sandbox = next.sandbox;
      return next.rt;
    },
    allowLeftovers: (reason, only) => leaks.allowLeftovers(reason, only),
    allowViolations: (reason, names) => invariants.allowViolations(reason, names),
    async cleanup() {
      for (const rt of runtimes) await rt.kernel.stop().catch(() => {});
      for (const h of hosts) await h.close().catch(() => {});
      await model.close();
      // After every host stopped: what remains now is what the store must account for.
      let leak: unknown;
      try {
        leak = await leaks.check(storePath);
      } catch (err) {
        leak = err;
      }
      // Every run the test created keeps the run invariants (issue 17).
      let broken: unknown;
      try {
        broken = await invariants.check(storePath);
      } catch (err) {
        broken = err;
      }
      await removeHostArtifacts(docker, hostId, [storePath]);
      for (const s of stores) await s.close().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
      if (leak) throw leak;
      if (broken) throw broken;
    },
  };
  return world;
}
